package ccm

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// TestDefaultOptions: a zero Options means DefaultOptions, field by field: a default written in
// DefaultOptions and forgotten in withDefaults (or the other way around) fails here.
func TestDefaultOptions(t *testing.T) {
	t.Parallel()

	got, want := Options{}.WithDefaults(), DefaultOptions()
	got.Logger, want.Logger = nil, nil

	assert.Equal(t, want, got)

	// The README promises that the machines waiting are read again at most 10s apart after a Talos API
	// outage.
	assert.Equal(t, 10*time.Second, want.TalosSource.RetryMax)

	// What is set stays.
	set := Options{Concurrency: 3, CSRConcurrency: 2, TalosSource: TalosSourceOptions{ProbeInterval: time.Second}}.WithDefaults()
	assert.Equal(t, 3, set.Concurrency)
	assert.Equal(t, 2, set.CSRConcurrency)
	assert.Equal(t, time.Second, set.TalosSource.ProbeInterval)
	assert.Equal(t, want.TalosSource.PlatformRefresh, set.TalosSource.PlatformRefresh)
}

// TestWithRateLimit: the options' rate limit wins, then the client configuration's own, then the default.
func TestWithRateLimit(t *testing.T) {
	t.Parallel()

	limiter := flowcontrol.NewTokenBucketRateLimiter(1, 1)
	d := DefaultOptions()

	for _, tt := range []struct {
		name       string
		opts       Options
		cfg        *rest.Config
		qps        float32
		burst      int
		rateLimits bool
	}{
		{"defaults", Options{}, &rest.Config{}, d.KubeAPIQPS, d.KubeAPIBurst, false},
		{"the configuration's own", Options{}, &rest.Config{QPS: 20, Burst: 30}, 20, 30, false},
		{"the configuration's own limiter", Options{}, &rest.Config{RateLimiter: limiter}, 0, 0, true},
		{"the options win", Options{KubeAPIQPS: 7, KubeAPIBurst: 9}, &rest.Config{QPS: 20, Burst: 30}, 7, 9, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			got := tt.opts.withRateLimit(tt.cfg)
			assert.Equal(t, tt.qps, got.QPS)
			assert.Equal(t, tt.burst, got.Burst)
			assert.Equal(t, tt.rateLimits, got.RateLimiter != nil)
			assert.NotSame(t, tt.cfg, got, "a copy")
		})
	}
}

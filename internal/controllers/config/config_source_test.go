package config_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	configctrl "github.com/talos-ccm/talos-ccm/internal/controllers/config"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
)

// rejections records the rejected config changes, and tells of each as it comes.
type rejections struct {
	reported chan struct{}
	errs     []error
	mu       sync.Mutex
}

func newRejections() *rejections {
	return &rejections{reported: make(chan struct{}, 16)}
}

func (r *rejections) ConfigRejected(_ string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.errs = append(r.errs, err)

	select {
	case r.reported <- struct{}{}:
	default: // The test fails on the count anyway.
	}
}

// await waits for the next report, at most the suite's assertion timeout.
func (r *rejections) await(t *testing.T, s *ctest.Suite) {
	t.Helper()

	ctx, cancel := context.WithTimeout(s.Ctx(), ctest.DefaultAssertionTimeout)
	defer cancel()

	select {
	case <-r.reported:
	case <-ctx.Done():
		t.Fatalf("no config change was rejected: %v", ctx.Err())
	}
}

func (r *rejections) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()

	return len(r.errs)
}

func (r *rejections) last() error {
	r.mu.Lock()
	defer r.mu.Unlock()

	if len(r.errs) == 0 {
		return nil
	}

	return r.errs[len(r.errs)-1]
}

func counterValue(t *testing.T) float64 {
	t.Helper()

	var m dto.Metric

	require.NoError(t, metrics.ConfigReloadFailures.Write(&m))

	return m.GetCounter().GetValue()
}

const (
	configV1 = "global:\n  clusterName: c1\ntransformations:\n  - name: web\n    labels: {example.com/web: \"\"}\n"
	configV2 = "global:\n  clusterName: c2\ntransformations:\n  - name: db\n    labels: {example.com/db: \"\"}\n"
	configV3 = "global:\n  clusterName: c3\n"
	// configBad has a regular expression that does not compile.
	configBad = "transformations:\n  - name: web\n    nodeSelector:\n      - matchExpressions:\n          - {key: hostname, operator: Regexp, values: [\"[\"]}\n    labels: {a: b}\n"
)

// configMapDir lays out dir as the kubelet mounts a ConfigMap: the file is a symlink through ..data to a
// timestamped directory, and an update swaps ..data.
type configMapDir struct {
	dir string
	gen int
}

func (c *configMapDir) write(t *testing.T, content string) {
	t.Helper()

	c.gen++

	data := filepath.Join(c.dir, "..2026_01_01_00_00_0"+string(rune('0'+c.gen)))
	require.NoError(t, os.Mkdir(data, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(data, "config.yaml"), []byte(content), 0o600))

	tmp := filepath.Join(c.dir, "..data_tmp")
	require.NoError(t, os.Symlink(filepath.Base(data), tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(c.dir, "..data")))

	link := filepath.Join(c.dir, "config.yaml")
	if _, err := os.Lstat(link); errors.Is(err, os.ErrNotExist) {
		require.NoError(t, os.Symlink(filepath.Join("..data", "config.yaml"), link))
	}
}

//nolint:paralleltest // It reads a process-wide counter.
func TestConfigSourceReloads(t *testing.T) {
	for _, layout := range []string{"file", "configmap"} {
		t.Run(layout, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config.yaml")
			cm := &configMapDir{dir: dir}

			write := func(content string) {
				if layout == "configmap" {
					cm.write(t, content)
				} else {
					require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
				}
			}

			write(configV1)

			initial, err := configfile.Load(path)
			require.NoError(t, err)

			rejected := newRejections()
			rt := ctest.New(t, ctest.WithTimeout(30*time.Second))
			rt.Register(&configctrl.ConfigSourceController{
				Flags:    &specs.ConfigSpec{ClusterName: "flag", Source: "flags", ProviderIdWaitSeconds: 60},
				Explicit: nil,
				Path:     path,
				Initial:  initial,
				Rejected: rejected,
				// Notifications, not polling, must carry these changes.
				PollInterval: time.Hour,
			})
			rt.Start()

			assertConfig := func(clusterName string, rules ...string) {
				t.Helper()

				ctest.AssertResource(rt, config.ActiveID, func(c *config.Config, a *assert.Assertions) {
					spec := c.TypedSpec().Value
					a.Equal(clusterName, spec.GetClusterName())
					a.Equal(int64(60), spec.GetProviderIdWaitSeconds())

					var names []string
					for _, r := range spec.GetTransformations() {
						names = append(names, r.GetName())
					}

					a.Equal(rules, names)
				})
			}

			assertConfig("c1", "web")

			write(configV2)
			assertConfig("c2", "db")

			failures := counterValue(t)

			write(configBad)
			rejected.await(t, rt)
			assert.ErrorContains(t, rejected.last(), path+":5: rule \"web\": nodeSelector[0].matchExpressions[0]: invalid regular expression")
			assert.Equal(t, failures+1, counterValue(t))

			// The last good config stays.
			assertConfig("c2", "db")

			// The same bad content is reported once: the file is read one notification at a time, in order,
			// so a second report of it would have come before the next content is applied.
			write(configV3)
			assertConfig("c3")
			assert.Equal(t, 1, rejected.count())
			assert.Equal(t, failures+1, counterValue(t))
		})
	}
}

//nolint:paralleltest // It reads a process-wide counter.
func TestConfigSourcePollsAndSurvivesRemoval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")

	require.NoError(t, os.WriteFile(path, []byte(configV1), 0o600))

	rejected := newRejections()
	rt := ctest.New(t, ctest.WithTimeout(30*time.Second))
	// No Initial: the controller reads the file itself.
	rt.Register(&configctrl.ConfigSourceController{
		Flags:        &specs.ConfigSpec{Source: "flags"},
		Path:         path,
		Rejected:     rejected,
		PollInterval: 100 * time.Millisecond,
	})
	rt.Start()

	ctest.AssertResource(rt, config.ActiveID, func(c *config.Config, a *assert.Assertions) {
		a.Equal("c1", c.TypedSpec().Value.GetClusterName())
		a.Equal("file "+path+" and flags", c.TypedSpec().Value.GetSource())
	})

	require.NoError(t, os.Remove(path))
	rejected.await(t, rt)
	assert.ErrorContains(t, rejected.last(), "failed to read config file")

	// Still the last good config.
	ctest.AssertResource(rt, config.ActiveID, func(c *config.Config, a *assert.Assertions) {
		a.Equal("c1", c.TypedSpec().Value.GetClusterName())
	})

	require.NoError(t, os.WriteFile(path, []byte(configV2), 0o600))

	ctest.AssertResource(rt, config.ActiveID, func(c *config.Config, a *assert.Assertions) {
		a.Equal("c2", c.TypedSpec().Value.GetClusterName())
	})

	// Reads of the missing file after the first (each poll, each notification) report nothing: the file is
	// read one poll or notification at a time, in order, so another report would have come before the new
	// content was applied.
	assert.Equal(t, 1, rejected.count())
}

func TestConfigSourceFlagsOnly(t *testing.T) {
	t.Parallel()

	rt := ctest.New(t, ctest.WithTimeout(10*time.Second))
	rt.Register(&configctrl.ConfigSourceController{Flags: &specs.ConfigSpec{ClusterName: "flags-only", Source: "flags"}})
	rt.Start()

	ctest.AssertResource(rt, config.ActiveID, func(c *config.Config, a *assert.Assertions) {
		a.Equal("flags-only", c.TypedSpec().Value.GetClusterName())
		a.Equal("flags", c.TypedSpec().Value.GetSource())
	})
}

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// apiServerOutage is how long the apiserver stays down: as long as a control-plane upgrade keeps it away,
// and longer than client-go's reflectors back off at most (30s), so that a backoff left to run its course
// would show.
const apiServerOutage = 30 * time.Second

// TestAPIServerRestart stops the kube-apiserver for half a minute and starts it again (same address,
// certificates and etcd data) after talos-ccm initialized some Nodes; Nodes join right after its return.
// talos-ccm resumes at once: every joining Node is initialized within 15s of the apiserver's return. It says
// so: one Warning when the apiserver becomes unreachable (with the error), one Info line when it is back
// (with how long it was gone), and /readyz fails in between (but not /healthz). The test has a control
// plane of its own, so that the outage leaves the other tests' alone.
func TestAPIServerRestart(t *testing.T) {
	cp := testenv.StartRestartable(t)
	machines := fleet("apirestart", 40, 37)
	early, late := machines[:20], machines[20:]

	_, srv := talossim.StartTest(t, machines)

	observed, logs := observer.New(zapcore.InfoLevel)
	logger := zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), observed))
	probes := testenv.FreeAddress(t)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)

	go func() {
		done <- app.Run(ctx, app.Options{RestConfig: cp.Config, TalosConfig: srv.TalosconfigPath(), HealthProbeBindAddress: probes}, logger)
	}()

	t.Cleanup(func() {
		cancel()

		select {
		case err := <-done:
			assert.NoError(t, err, "talos-ccm failed")
		case <-time.After(30 * time.Second):
			t.Error("talos-ccm did not stop within 30s")
		}
	})

	talossim.RunTestKubelets(t, cp.Config, early)
	waitNodesOf(t, cp.Clientset(), names(early), time.Minute, "the first Nodes initialized", initialized)
	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "talos-ccm ready", probeStatus(probes, "/readyz", http.StatusOK))

	readiness := watchStatus(t, probes, "/readyz")
	health := watchStatus(t, probes, "/healthz")

	stopping, started := cp.RestartAPIServer(t, apiServerOutage)
	t.Logf("the apiserver was away for %s", started.Sub(stopping).Round(100*time.Millisecond))

	talossim.RunTestKubelets(t, cp.Config, late)
	waitNodesOf(t, cp.Clientset(), names(machines), time.Until(started.Add(15*time.Second)),
		"every Node initialized within 15s of the apiserver's return", initialized)
	t.Logf("every Node initialized %s after the apiserver's return", time.Since(started).Round(100*time.Millisecond))

	testenv.Eventually(t, 10*time.Second, 100*time.Millisecond, "talos-ccm ready again", probeStatus(probes, "/readyz", http.StatusOK))

	lost := logs.FilterMessage("api unreachable").FilterField(zap.String("api", "kubernetes")).All()
	if assert.Len(t, lost, 1, "one Warning for the apiserver's loss") {
		assert.Equal(t, zapcore.WarnLevel, lost[0].Level)
		assert.Contains(t, lost[0].ContextMap()["error"], "connection refused", "the Warning says why")
		assert.WithinRange(t, lost[0].Time, stopping, started, "the loss is logged during the outage")
	}

	back := logs.FilterMessage("api reachable again").FilterField(zap.String("api", "kubernetes")).All()
	if assert.Len(t, back, 1, "one Info line for the apiserver's return") {
		assert.Equal(t, zapcore.InfoLevel, back[0].Level)
		assert.GreaterOrEqual(t, back[0].ContextMap()["unreachable_for"], apiServerOutage, "the Info line says how long it was gone")
	}

	outage := []time.Time{stopping.Add(5 * time.Second), started}
	assert.True(t, readiness.seen(http.StatusServiceUnavailable, outage[0], outage[1]), "/readyz fails during the outage")
	assert.False(t, health.seen(http.StatusInternalServerError, stopping, time.Now()), "/healthz never fails for an apiserver outage")
	assert.True(t, health.seen(http.StatusOK, outage[0], outage[1]), "/healthz passes during the outage")
}

// waitNodesOf waits until cond holds for every named Node of clientset's cluster, or fails the test after
// timeout, saying what it awaited.
func waitNodesOf(t *testing.T, clientset kubernetes.Interface, nodes []string, timeout time.Duration, what string, cond func(*corev1.Node) bool) {
	t.Helper()

	testenv.Eventually(t, timeout, 200*time.Millisecond, what, func(ctx context.Context) error {
		return testenv.Every(nodes, func(name string) error {
			n, err := clientset.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}

			if !cond(n) {
				return errNotYet
			}

			return nil
		})
	})
}

// getStatus returns the HTTP status of a GET of path on addr.
func getStatus(ctx context.Context, addr, path string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		return 0, err
	}

	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}

	return resp.StatusCode, resp.Body.Close()
}

// probeStatus is a check that a GET of path on addr answers want.
func probeStatus(addr, path string, want int) func(context.Context) error {
	return func(ctx context.Context) error {
		code, err := getStatus(ctx, addr, path)
		if err != nil {
			return err
		}

		if code != want {
			return fmt.Errorf("%s answered %d, want %d", path, code, want)
		}

		return nil
	}
}

// statusWatch records what a probe answered, and when, until the test ends.
type statusWatch struct {
	mu      sync.Mutex
	answers []statusAnswer
}

type statusAnswer struct {
	at   time.Time
	code int
}

// watchStatus asks path on addr every 200ms until the test ends.
func watchStatus(t *testing.T, addr, path string) *statusWatch {
	t.Helper()

	w := &statusWatch{}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	go func() {
		defer close(done)

		ticker := time.NewTicker(200 * time.Millisecond)
		defer ticker.Stop()

		for {
			code, err := getStatus(ctx, addr, path)
			if err != nil && !errors.Is(err, context.Canceled) {
				code = -1
			}

			w.mu.Lock()
			w.answers = append(w.answers, statusAnswer{at: time.Now(), code: code})
			w.mu.Unlock()

			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
		}
	}()

	t.Cleanup(func() {
		cancel()
		<-done
	})

	return w
}

// seen says whether the probe answered code between from and to.
func (w *statusWatch) seen(code int, from, to time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()

	return slices.ContainsFunc(w.answers, func(a statusAnswer) bool {
		return a.code == code && !a.at.Before(from) && !a.at.After(to)
	})
}

package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// leaderOptions run only the CSR approver (no Talos API needed) under leader election on the Lease named
// lease in kube-system, with timings short enough for a test.
func leaderOptions(lease string, cfg *rest.Config) app.Options {
	return app.Options{
		RestConfig:  cfg,
		Controllers: []string{"csr-approval"},
		LeaderElection: app.LeaderElection{
			Enabled:       true,
			Namespace:     "kube-system",
			Name:          lease,
			LeaseDuration: 3 * time.Second,
			RenewDeadline: 2 * time.Second,
			RetryPeriod:   250 * time.Millisecond,
		},
	}
}

// runLeader runs talos-ccm in-process until it returns, which the caller expects: it is not startCCM, whose
// talos-ccm must run until the test stops it. The returned channel receives what app.Run returned.
func runLeader(t *testing.T, opts app.Options) <-chan error {
	t.Helper()

	ctx, cancel := context.WithCancel(t.Context())
	result, done := make(chan error, 1), make(chan struct{})

	go func() {
		defer close(done)

		result <- app.Run(ctx, opts, zaptest.NewLogger(t))
	}()

	t.Cleanup(func() {
		cancel()

		select {
		case <-done:
		case <-time.After(30 * time.Second):
			panic("talos-ccm did not stop within 30s")
		}
	})

	return result
}

func leaseHolder(t *testing.T, name string) string {
	t.Helper()

	holder, _ := leaseHolderOf(t.Context(), name)

	return holder
}

// leaseHolderOf returns the holder of the Lease in kube-system, "" when it has none.
func leaseHolderOf(ctx context.Context, name string) (string, error) {
	l, err := env.Clientset().CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return "", err
	}

	return *l.Spec.HolderIdentity, nil
}

// waitLeader waits until the Lease in kube-system has a holder other than previous ("" for any holder), and
// returns it.
func waitLeader(t *testing.T, lease string, timeout time.Duration, previous string) string {
	t.Helper()

	var holder string

	what := "Lease " + lease + " held"
	if previous != "" {
		what += " by another than " + previous
	}

	testenv.Eventually(t, timeout, 100*time.Millisecond, what, func(ctx context.Context) error {
		var err error

		holder, err = leaseHolderOf(ctx, lease)

		switch {
		case err != nil:
			return err
		case holder == "" || holder == previous:
			return fmt.Errorf("holder %q", holder)
		default:
			return nil
		}
	})

	return holder
}

// A leader that loses its Lease exits (README, Operations), to be restarted as a follower: it never goes
// on running its controllers next to the new leader.
func TestLeaderExitsWhenLeaseLost(t *testing.T) {
	const lease = "talos-ccm-lost"

	result := runLeader(t, leaderOptions(lease, env.Config))

	waitLeader(t, lease, 20*time.Second, "")

	// Another process takes the Lease, as one does when the leader failed to renew in time. The leader renews
	// it every 250ms meanwhile, so the take is redone from a fresh read when a renewal came in between.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := env.Clientset().CoordinationV1().Leases("kube-system").Get(t.Context(), lease, metav1.GetOptions{})
		if err != nil {
			return err
		}

		holder, duration := "another-talos-ccm", int32(60)
		l.Spec.HolderIdentity = &holder
		l.Spec.LeaseDurationSeconds = &duration
		l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		l.Spec.AcquireTime = l.Spec.RenewTime

		_, err = env.Clientset().CoordinationV1().Leases("kube-system").Update(t.Context(), l, metav1.UpdateOptions{})

		return err
	})
	require.NoError(t, err)

	select {
	case err := <-result:
		require.ErrorContains(t, err, "leader election lost")
	case <-time.After(15 * time.Second):
		t.Fatal("talos-ccm did not exit within 15s of losing its Lease")
	}

	require.Equal(t, "another-talos-ccm", leaseHolder(t, lease), "the exiting process leaves the Lease to its holder")
}

// /healthz fails when a leader stops renewing its Lease (README, Operations): a leader whose renewals
// hang (here: every Lease request hangs, whatever its deadline) is restarted by its liveness probe.
func TestHealthzFailsWhenRenewalStops(t *testing.T) {
	const lease = "talos-ccm-stuck"

	hang := &hangingLeases{release: make(chan struct{})}

	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return &hangingLeasesTransport{hang: hang, next: next} })

	addr := freeAddress(t)
	opts := leaderOptions(lease, cfg)
	opts.HealthProbeBindAddress = addr

	runLeader(t, opts)

	// Registered after runLeader's, so that it runs first: talos-ccm stops once its requests return.
	t.Cleanup(hang.releaseAll)

	waitLeader(t, lease, 20*time.Second, "")

	code, body := httpGet(t, "http://"+addr+"/healthz")
	require.Equal(t, http.StatusOK, code, "healthy while renewing: %s", body)

	stopped := time.Now()

	hang.hanging.Store(true)

	testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, "/healthz fails once the leader stops renewing", func(context.Context) error {
		code, body = httpGet(t, "http://"+addr+"/healthz")
		if code != http.StatusInternalServerError {
			return fmt.Errorf("status %d: %s", code, body)
		}

		return nil
	})

	require.True(t, strings.Contains(body, "leader election"), "the failure names the leader election: %s", body)
	t.Logf("/healthz failed %s after renewals stopped", time.Since(stopped).Round(100*time.Millisecond))

	// Not at once: a leader is healthy as long as its Lease could still be renewed in time.
	require.Greater(t, time.Since(stopped), 3*time.Second, "/healthz failed before the Lease ran out")
}

// hangingLeases makes every Lease request hang, ignoring its deadline, while hanging is set, until release
// is closed.
type hangingLeases struct {
	hanging atomic.Bool
	release chan struct{}
	once    sync.Once
}

func (h *hangingLeases) releaseAll() {
	h.once.Do(func() { close(h.release) })
}

type hangingLeasesTransport struct {
	hang *hangingLeases
	next http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *hangingLeasesTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.hang.hanging.Load() && strings.Contains(req.URL.Path, "/"+coordinationv1.GroupName+"/") {
		<-t.hang.release
	}

	return t.next.RoundTrip(req)
}

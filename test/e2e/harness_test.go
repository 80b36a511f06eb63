package e2e_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// ccm is one talos-ccm running in-process.
type ccm struct {
	writes   *testenv.RequestCounter
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once

	mu             sync.Mutex
	errors         []string
	errorsExpected atomic.Bool
}

// startCCM runs talos-ccm against the shared control plane and the given simulated fleet; without a fleet
// (srv nil) it has no talosconfig, as when only the CSR approver runs.
func startCCM(t *testing.T, srv *talossim.Server, opts app.Options) *ccm {
	t.Helper()

	cfg, counter := testenv.CountRequests(env.Config)

	opts.RestConfig = cfg
	if srv != nil {
		opts.TalosConfig = srv.TalosconfigPath()
	}

	ctx, cancel := context.WithCancel(t.Context())
	c := &ccm{writes: counter, cancel: cancel, done: make(chan error, 1)}

	// Every error-level line talos-ccm logs fails the test, unless the test causes errors on purpose
	// (expectErrors). Registered before c.stop, this check runs after talos-ccm has stopped.
	t.Cleanup(func() {
		if errs := c.loggedErrors(); len(errs) > 0 && !c.errorsExpected.Load() {
			t.Errorf("talos-ccm logged %d error(s) the test did not cause on purpose, the first: %s", len(errs), errs[0])
		}
	})

	logger := zap.New(zapcore.RegisterHooks(zaptest.NewLogger(t).Core(), func(e zapcore.Entry) error {
		if e.Level >= zapcore.ErrorLevel {
			c.mu.Lock()
			c.errors = append(c.errors, e.LoggerName+": "+e.Message)
			c.mu.Unlock()
		}

		return nil
	}))

	go func() { c.done <- app.Run(ctx, opts, logger) }()

	t.Cleanup(c.stop)

	return c
}

// expectErrors tells the log check that this test makes talos-ccm log errors on purpose.
func (c *ccm) expectErrors() {
	c.errorsExpected.Store(true)
}

func (c *ccm) loggedErrors() []string {
	c.mu.Lock()
	defer c.mu.Unlock()

	return slices.Clone(c.errors)
}

func (c *ccm) stop() {
	c.stopOnce.Do(func() {
		c.cancel()

		select {
		case <-c.done:
		case <-time.After(30 * time.Second):
			panic("talos-ccm did not stop within 30s")
		}
	})
}

// fleet generates count machines whose names start with prefix, so that tests sharing the apiserver never
// see each other's Nodes.
func fleet(prefix string, count int, seed int64) []talossim.Machine {
	machines := talossim.Generate(count, seed)

	for i := range machines {
		machines[i].Name = prefix + "-" + machines[i].Name
	}

	return machines
}

// joinNodes registers the machines' Nodes as their kubelets (started with --cloud-provider=external) do,
// and deletes them when the test ends.
func joinNodes(t *testing.T, machines []talossim.Machine) *talossim.Kubelets {
	t.Helper()

	kubelets, err := talossim.NewKubelets(env.Config, machines, talossim.KubeletOptions{})
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	go func() {
		defer close(done)

		kubelets.Run(ctx) //nolint:errcheck
	}()

	t.Cleanup(func() {
		cancel()
		<-done

		for _, m := range machines {
			env.Clientset().CoreV1().Nodes().Delete(context.Background(), m.Name, metav1.DeleteOptions{}) //nolint:errcheck
		}
	})

	return kubelets
}

// waitNodes waits until cond holds for every named Node, or fails the test after timeout.
func waitNodes(t *testing.T, names []string, timeout time.Duration, cond func(*corev1.Node) bool) {
	t.Helper()

	deadline := time.Now().Add(timeout)

	for {
		pending := []string{}

		for _, name := range names {
			n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
			if err != nil || !cond(n) {
				pending = append(pending, name)
			}
		}

		if len(pending) == 0 {
			return
		}

		if time.Now().After(deadline) {
			t.Fatalf("%d nodes did not reach the expected state within %s: %s", len(pending), timeout, strings.Join(pending, ", "))
		}

		time.Sleep(200 * time.Millisecond)
	}
}

func initialized(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
			return false
		}
	}

	return true
}

func names(machines []talossim.Machine) []string {
	out := make([]string, len(machines))
	for i, m := range machines {
		out[i] = m.Name
	}

	return out
}

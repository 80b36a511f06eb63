package e2e_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// ccm is one talos-ccm running in-process.
type ccm struct {
	writes   *testenv.RequestCounter
	cancel   context.CancelFunc
	done     chan error
	stopOnce sync.Once
	t        *testing.T

	mu     sync.Mutex
	errors []string
	// expected are the steps, by what they do, during which the test makes talos-ccm log errors on
	// purpose (expectErrors); expectedLogged counts the errors logged during them.
	expected       []string
	expectedLogged int
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
	c := &ccm{writes: counter, cancel: cancel, done: make(chan error, 1), t: t}

	// Every error-level line talos-ccm logs fails the test, unless it is logged during a step that causes
	// errors on purpose (expectErrors). Registered before c.stop, this check runs after talos-ccm has stopped.
	t.Cleanup(func() {
		if errs := c.loggedErrors(); len(errs) > 0 {
			t.Errorf("talos-ccm logged %d error(s) the test did not cause on purpose, the first: %s", len(errs), errs[0])
		}
	})

	logger := zap.New(zapcore.RegisterHooks(zaptest.NewLogger(t).Core(), func(e zapcore.Entry) error {
		if e.Level >= zapcore.ErrorLevel {
			c.mu.Lock()
			if len(c.expected) > 0 {
				c.expectedLogged++
			} else {
				c.errors = append(c.errors, e.LoggerName+": "+e.Message)
			}
			c.mu.Unlock()
		}

		return nil
	}))

	// talos-ccm runs until the test stops it: an exit before that fails the test at once, so that a test
	// checking that something did not happen cannot pass because nothing runs any more.
	go func() {
		err := app.Run(ctx, opts, logger)
		if ctx.Err() == nil {
			t.Errorf("talos-ccm exited before the test stopped it: %v", err)

			// Reported: stop has nothing more to say.
			err = nil
		}

		c.done <- err
	}()

	t.Cleanup(c.stop)

	return c
}

// expectErrors tells the log check that the step starting now, described by why, makes talos-ccm log
// errors on purpose; the returned function ends the step, and fails the test if the step logged no error.
// Errors logged outside such steps fail the test.
func (c *ccm) expectErrors(why string) (done func()) {
	c.mu.Lock()
	c.expected = append(c.expected, why)
	logged := c.expectedLogged
	c.mu.Unlock()

	return func() {
		c.t.Helper()

		c.mu.Lock()
		c.expected = slices.DeleteFunc(c.expected, func(s string) bool { return s == why })
		logged = c.expectedLogged - logged
		c.mu.Unlock()

		if logged == 0 {
			c.t.Errorf("talos-ccm logged no error while %s", why)
		}
	}
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
		case err := <-c.done:
			if err != nil {
				c.t.Errorf("talos-ccm failed: %v", err)
			}
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

	return talossim.RunTestKubelets(t, env.Config, machines)
}

// waitNodes waits until cond holds for every named Node, or fails the test after timeout.
func waitNodes(t *testing.T, names []string, timeout time.Duration, cond func(*corev1.Node) bool) {
	t.Helper()

	waitNodesOf(t, env.Clientset(), names, timeout, "Nodes in the expected state", cond)
}

// errNotYet is what a check over an object says when the object is not in the awaited state yet.
var errNotYet = errors.New("not yet")

func initialized(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == kubekeys.TaintUninitialized {
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

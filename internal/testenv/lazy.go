package testenv

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// Lazy is a control plane shared by the tests of one package, started by the first test that needs it, so
// that a run of the package's unit tests alone never starts (or builds) one. TestMain calls Stop once the
// tests ran.
type Lazy struct {
	once sync.Once
	env  *Env
	stop func()
	err  error
}

// Env returns the control plane, started on first use, or fails the test; with -short it skips the test.
func (l *Lazy) Env(t *testing.T) *Env {
	t.Helper()

	if testing.Short() {
		t.Skip("needs a control plane (kube-apiserver and etcd)")
	}

	l.once.Do(func() {
		l.env, l.stop, l.err = StartShared()
	})

	if l.err != nil {
		t.Fatal(l.err)
	}

	return l.env
}

// Stop stops the control plane, if a test started it.
func (l *Lazy) Stop() {
	if l.stop != nil {
		l.stop()
	}
}

// Run runs the tests of m, stops the control plane, and then, when the tests passed, fails on leaked
// goroutines; it returns the exit code for os.Exit. It is the whole TestMain of a package that shares one.
func (l *Lazy) Run(m *testing.M) int {
	code := m.Run()

	l.Stop()

	if code == 0 {
		if err := goleak.Find(
			// klog's flush daemon runs for the life of the process once klog is used.
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)

			code = 1
		}
	}

	return code
}

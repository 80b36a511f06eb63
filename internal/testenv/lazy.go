package testenv

import (
	"sync"
	"testing"
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

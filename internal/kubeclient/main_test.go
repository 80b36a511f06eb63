package kubeclient_test

import (
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// shared is the control plane of the package's end-to-end tests, started by the first test that needs it, so
// that the unit tests alone never start (or build) one; TestMain stops it.
var shared struct {
	once sync.Once
	env  *testenv.Env
	stop func()
	err  error
}

func sharedEnv(t *testing.T) *testenv.Env {
	t.Helper()

	if testing.Short() {
		t.Skip("needs a control plane (kube-apiserver and etcd)")
	}

	shared.once.Do(func() {
		shared.env, shared.stop, shared.err = testenv.StartShared()
	})

	require.NoError(t, shared.err)

	return shared.env
}

// TestMain checks for leaked goroutines (informers, electors) once every test ran and the control plane is
// stopped.
func TestMain(m *testing.M) {
	code := m.Run()

	if shared.stop != nil {
		shared.stop()
	}

	if code == 0 {
		if err := goleak.Find(
			// klog's flush daemon runs for the life of the process once klog is used.
			goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)

			code = 1
		}
	}

	os.Exit(code)
}

package kubeclient_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// shared is the control plane of the package's end-to-end tests.
var shared testenv.Lazy

// sharedClient returns the shared control plane and a client of it, as the admin, speaking protobuf.
func sharedClient(t *testing.T) (*testenv.Env, *kubeclient.Client) {
	t.Helper()

	env := shared.Env(t)

	client, err := kubeclient.NewForConfig(protobufConfig(env))
	require.NoError(t, err)

	return env, client
}

// TestMain checks for leaked goroutines (informers, electors) once every test ran and the control plane is
// stopped.
//
// The informers report their errors to utilruntime.HandleError, whose last handler sleeps until a
// millisecond after the last error handled, by the clock of whoever handled it: the synctest bubbles' clocks
// run minutes ahead of the real one, and an informer of a real-time test would then sleep minutes. Here the
// errors are only logged.
func TestMain(m *testing.M) {
	utilruntime.ErrorHandlers = utilruntime.ErrorHandlers[:1]

	os.Exit(shared.Run(m))
}

package kubeclient_test

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"

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
func TestMain(m *testing.M) {
	os.Exit(shared.Run(m))
}

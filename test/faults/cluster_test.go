//go:build faults

package faults_test

import (
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// cluster is a control plane as the tests use it: the shared one, or one of a test's own.
type cluster struct {
	// config authenticates as an admin allowed to impersonate nodes.
	config    *rest.Config
	clientset kubernetes.Interface
	// kubeconfig writes an admin kubeconfig for talos-ccm and returns its path.
	kubeconfig func(t *testing.T) string
}

// sharedCluster is the control plane of TestMain.
func sharedCluster() cluster {
	return cluster{
		config:    env.Config,
		clientset: env.Clientset(),
		kubeconfig: func(t *testing.T) string {
			return env.KubeconfigFile(t)
		},
	}
}

// restartableControlPlane is a control plane of one test whose apiserver can be restarted (see
// testenv.StartRestartable).
type restartableControlPlane struct {
	cluster

	env *testenv.Env
}

// startRestartableControlPlane starts a control plane for one test and stops it when the test ends.
func startRestartableControlPlane(t *testing.T) *restartableControlPlane {
	t.Helper()

	e := testenv.StartRestartable(t)

	return &restartableControlPlane{
		env: e,
		cluster: cluster{
			config:     e.Config,
			clientset:  e.Clientset(),
			kubeconfig: func(t *testing.T) string { return e.KubeconfigFile(t) },
		},
	}
}

// restartAPIServer stops the apiserver, keeps it down for down once it has stopped, and starts it again; it
// returns when the apiserver is healthy again, with the times it started stopping and was back.
func (c *restartableControlPlane) restartAPIServer(t *testing.T, down time.Duration) (stopping, started time.Time) {
	t.Helper()

	return c.env.RestartAPIServer(t, down)
}

//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

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

// restartableControlPlane is an etcd and a kube-apiserver of one test whose apiserver can be restarted: on
// the same address, with the same certificates (kept in a directory of the test's, not a random one that
// envtest would replace) and, etcd running on, the same data. Clients configured before a restart work
// after it.
type restartableControlPlane struct {
	cluster

	env *envtest.Environment
}

// startRestartableControlPlane starts a control plane for one test and stops it when the test ends.
func startRestartableControlPlane(t *testing.T) *restartableControlPlane {
	t.Helper()

	dir, err := testenv.AssetsDir()
	if err != nil {
		t.Fatal(err)
	}

	e := &envtest.Environment{BinaryAssetsDirectory: dir}
	e.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}

	apiServer := e.ControlPlane.GetAPIServer()
	apiServer.Path = filepath.Join(dir, "kube-apiserver")
	apiServer.CertDir = t.TempDir()

	// As the shared control plane: the Node authorizer and NodeRestriction hold kubelet identities to their
	// own Nodes and certificate requests, and the request limits let thousands of writes in at once.
	testenv.ConfigureAPIServer(apiServer.Configure())

	cfg, err := e.Start()
	if err != nil {
		t.Fatal(errors.Join(fmt.Errorf("failed to start the control plane: %w", err), e.Stop()))
	}

	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Errorf("failed to stop the control plane: %v", err)
		}
	})

	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("failed to create the clientset: %v", err)
	}

	return &restartableControlPlane{
		env: e,
		cluster: cluster{
			config:    cfg,
			clientset: clientset,
			kubeconfig: func(t *testing.T) string {
				path := filepath.Join(t.TempDir(), "kubeconfig")
				if err := os.WriteFile(path, e.KubeConfig, 0o600); err != nil {
					t.Fatalf("failed to write kubeconfig: %v", err)
				}

				return path
			},
		},
	}
}

// restartAPIServer stops the apiserver, keeps it down for down once it has stopped, and starts it again; it
// returns when the apiserver is healthy again, with the times it started stopping and was back.
func (c *restartableControlPlane) restartAPIServer(t *testing.T, down time.Duration) (stopping, started time.Time) {
	t.Helper()

	apiServer := c.env.ControlPlane.GetAPIServer()
	address := apiServer.ListenAddr

	// A graceful stop waits for requests in flight, and talos-ccm and the kubelets keep many open: after a
	// few seconds it ends with SIGKILL, as an apiserver crash or a node failure would.
	apiServer.StopTimeout = 3 * time.Second
	stopping = time.Now()

	if err := apiServer.Stop(); err != nil {
		t.Logf("the apiserver did not stop gracefully (%v): killed", err)
	}

	// The killed process may hold its port for a moment.
	portClosed := func(ctx context.Context) error {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", address.HostPort())
		if err != nil {
			// Refused, unless the wait itself ended: nothing listens any more.
			return ctx.Err()
		}

		conn.Close() //nolint:errcheck

		return fmt.Errorf("%s accepts connections", address.HostPort())
	}

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the apiserver's port is free", portClosed)

	// The outage is the fault under test: it lasts down, and nothing serves on the apiserver's port meanwhile.
	testenv.Consistently(t, down, 100*time.Millisecond, "the apiserver stays down", portClosed)

	if err := apiServer.Start(); err != nil {
		t.Fatalf("failed to start the apiserver again: %v", err)
	}

	started = time.Now()

	if apiServer.ListenAddr != address {
		t.Fatalf("the apiserver came back on %v instead of %v", apiServer.ListenAddr, address)
	}

	return stopping, started
}

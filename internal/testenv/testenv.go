// Package testenv runs a real control plane (etcd and kube-apiserver) for the end-to-end tests,
// through controller-runtime's envtest, with binaries built from Go modules by hack/envtest.sh.
//
// A test that needs its own control plane calls Start; a package whose tests share one starts it
// from TestMain with StartShared. Programs outside tests (test/controlplane) use StartShared too.
package testenv

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Request limits of the apiserver: end-to-end tests and benchmarks push thousands of concurrent
// writes (nodes, CSRs, status updates) through one apiserver, well past its defaults (400/200),
// and a test should measure talos-ccm, not the apiserver rejecting requests with 429.
const (
	maxRequestsInflight         = 3000
	maxMutatingRequestsInflight = 1500
)

// Env is a running control plane.
type Env struct {
	// Config authenticates as an admin (user "admin" in group "system:masters"), which may also
	// impersonate any user.
	Config *rest.Config

	env        *envtest.Environment
	clientset  kubernetes.Interface
	kubeconfig []byte

	stopOnce sync.Once
	stopErr  error
}

// Start starts a control plane for one test, or fails the test, and stops it when the test ends.
func Start(t testing.TB) *Env {
	t.Helper()

	return startForTest(t, "")
}

// Service ranges of the dual-stack control plane (StartDualStack): an IPv4 range first, so that a Service
// without an ipFamilyPolicy stays IPv4 as on the others, then an IPv6 one.
const (
	DualStackServiceRangeIPv4 = "10.0.0.0/24"
	DualStackServiceRangeIPv6 = "fd00:10:96::/112"
)

// StartDualStack starts a control plane for one test, as Start does, whose Service ranges are one IPv4 and
// one IPv6 CIDR, so that Services may be dual-stack (ipFamilyPolicy PreferDualStack or RequireDualStack) or
// IPv6 only. The shared control planes stay IPv4 only, as envtest starts them.
func StartDualStack(t testing.TB) *Env {
	t.Helper()

	return startForTest(t, "", func(args *envtest.Arguments) {
		args.Set("service-cluster-ip-range", DualStackServiceRangeIPv4+","+DualStackServiceRangeIPv6)
	})
}

// startForTest starts a control plane for one test (see start for certDir and configure), or fails the test,
// and stops it when the test ends.
func startForTest(t testing.TB, certDir string, configure ...func(*envtest.Arguments)) *Env {
	t.Helper()

	env, err := start(certDir, configure...)
	if err != nil {
		t.Fatalf("failed to start the control plane: %v", err)
	}

	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("failed to stop the control plane: %v", err)
		}
	})

	return env
}

// StartShared starts a control plane outside any test, typically in TestMain to share it among a
// package's tests, and returns it with a function that stops it (reporting a failure to stop on
// stderr; call Env.Stop instead to get the error). The caller must stop it before exiting:
//
//	func TestMain(m *testing.M) {
//		env, stop, err := testenv.StartShared()
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//
//		sharedEnv = env
//		code := m.Run()
//		stop()
//		os.Exit(code)
//	}
func StartShared() (*Env, func(), error) {
	env, err := start("")
	if err != nil {
		return nil, nil, fmt.Errorf("failed to start the control plane: %w", err)
	}

	return env, func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "failed to stop the control plane: %v\n", err)
		}
	}, nil
}

// start starts etcd and kube-apiserver and waits until the apiserver serves the default namespace. certDir,
// when set, keeps the apiserver's certificates (instead of a directory envtest replaces at each start);
// configure sets apiserver flags beyond those of every control plane (ConfigureAPIServer).
func start(certDir string, configure ...func(*envtest.Arguments)) (*Env, error) {
	dir, err := AssetsDir()
	if err != nil {
		return nil, err
	}

	env := &envtest.Environment{
		BinaryAssetsDirectory: dir,
	}

	// Take the binaries from dir even when a caller's KUBEBUILDER_ASSETS or TEST_ASSET_* variable
	// names a directory without them.
	env.ControlPlane.Etcd = &envtest.Etcd{Path: filepath.Join(dir, "etcd")}

	apiServer := env.ControlPlane.GetAPIServer()
	apiServer.Path = filepath.Join(dir, "kube-apiserver")
	apiServer.CertDir = certDir

	ConfigureAPIServer(apiServer.Configure())

	for _, c := range configure {
		c(apiServer.Configure())
	}

	cfg, err := env.Start()
	if err != nil {
		// envtest stops what it started when the start fails midway, but not once both processes
		// run (for example when the default namespace never appears).
		return nil, errors.Join(err, env.Stop())
	}

	clientset, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("failed to create the clientset: %w", err), env.Stop())
	}

	return &Env{
		Config:     cfg,
		env:        env,
		clientset:  clientset,
		kubeconfig: env.KubeConfig,
	}, nil
}

// ConfigureAPIServer sets the kube-apiserver flags every control plane of the tests runs with, so
// that a test that starts its own control plane (one it restarts, say) runs as the shared one does.
func ConfigureAPIServer(args *envtest.Arguments) {
	args.Set("max-requests-inflight", strconv.Itoa(maxRequestsInflight))
	args.Set("max-mutating-requests-inflight", strconv.Itoa(maxMutatingRequestsInflight))
	// The Node authorizer in front of RBAC, as in a real cluster (Talos configures the same): it
	// is what lets a kubelet identity (user system:node:NAME in group system:nodes) create its
	// own CertificateSigningRequests and Node; RBAC alone binds no role to system:nodes.
	args.Set("authorization-mode", "Node,RBAC")
	// NodeRestriction, on top of the default admission plugins, as in a real cluster: a kubelet
	// identity may create and update only its own Node, may not change its taints once registered,
	// and may not set labels in the node-restriction.kubernetes.io namespace nor kubernetes.io
	// labels that are not a kubelet's (node-role.kubernetes.io/* among them). Hostile writes in the
	// tests are made with kubelet identities, so they are held to exactly what a stolen kubelet
	// credential could do.
	args.Set("enable-admission-plugins", "NodeRestriction")
}

// Clientset returns a clientset authenticated as the admin, shared by every caller.
func (e *Env) Clientset() kubernetes.Interface {
	return e.clientset
}

// WriteKubeconfig writes an admin kubeconfig (credentials inline) to path, for another process.
// The file appears complete or not at all, so a process polling for it never reads half of it.
func (e *Env) WriteKubeconfig(path string) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("failed to create kubeconfig file: %w", err)
	}

	// Removing the temporary file fails harmlessly once it is renamed.
	defer os.Remove(tmp.Name()) //nolint:errcheck

	if _, err = tmp.Write(e.kubeconfig); err != nil {
		tmp.Close() //nolint:errcheck

		return fmt.Errorf("failed to write kubeconfig file: %w", err)
	}

	if err = tmp.Close(); err != nil {
		return fmt.Errorf("failed to write kubeconfig file: %w", err)
	}

	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("failed to move kubeconfig file into place: %w", err)
	}

	return nil
}

// KubeconfigFile writes an admin kubeconfig into the test's temporary directory, or fails the
// test, and returns its path.
func (e *Env) KubeconfigFile(t testing.TB) string {
	t.Helper()

	path := filepath.Join(t.TempDir(), "kubeconfig")

	if err := e.WriteKubeconfig(path); err != nil {
		t.Fatalf("failed to write kubeconfig: %v", err)
	}

	return path
}

// Stop stops kube-apiserver and etcd and removes their data. Calls after the first return the
// first call's result.
func (e *Env) Stop() error {
	e.stopOnce.Do(func() {
		if err := e.env.Stop(); err != nil {
			e.stopErr = fmt.Errorf("failed to stop the control plane: %w", err)
		}
	})

	return e.stopErr
}

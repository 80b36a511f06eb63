package deploy_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
	ccmpkg "github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// forbiddenRecorder records the requests the apiserver refused with 403 Forbidden.
type forbiddenRecorder struct {
	mu        sync.Mutex
	forbidden []string
}

func (f *forbiddenRecorder) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(req)
		if err == nil && resp.StatusCode == http.StatusForbidden {
			f.mu.Lock()
			f.forbidden = append(f.forbidden, req.Method+" "+req.URL.Path)
			f.mu.Unlock()
		}

		return resp, err
	})
}

func (f *forbiddenRecorder) requests() []string {
	f.mu.Lock()
	defer f.mu.Unlock()

	return append([]string(nil), f.forbidden...)
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// TestTalosCCMRunsWithTheChartIdentity runs talos-ccm end to end as the chart's service account, with
// no rights but those of the chart's RBAC objects applied to the envtest apiserver, with the flags and
// the config file the chart renders (controllers, leader election on the chart's Lease, the default
// config file): it initializes a simulated fleet's Nodes and approves their kubelets' serving
// certificates without a single request refused, and a write it is not granted (deleting a Node, with
// deletion off) is refused.
func TestTalosCCMRunsWithTheChartIdentity(t *testing.T) {
	t.Parallel()

	env := controlPlane(t)

	const release, namespace = "e2e", "talos-ccm-e2e"

	createNamespace(t, env, namespace)

	objects := render(t, release, namespace, nil)
	user := applyIdentity(t, env, objects)

	// The chart's flags and config file, as the pod would get them.
	pod := podSpec(t, objects)
	args := argMap(pod.Spec.Containers[0].Args)

	configMap := convert[corev1.ConfigMap](t, find(t, objects, "ConfigMap", release+"-talos-ccm"))
	configFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(configFile, []byte(configMap.Data["config.yaml"]), 0o600))

	require.Equal(t, "true", args["--leader-elect"])

	machines := talossim.Generate(6, 42)
	for i := range machines {
		machines[i].Name = "chart-e2e-" + machines[i].Name
	}

	_, srv := talossim.StartTest(t, machines)

	recorder := &forbiddenRecorder{}
	identity := impersonate(env.Config, user, namespace)
	identity.Wrap(recorder.wrap)

	// The identity needs its RBAC objects in force before talos-ccm starts, or its first requests may
	// be refused while the authorizer's caches catch up.
	probe, err := kubernetes.NewForConfig(impersonate(env.Config, user, namespace))
	require.NoError(t, err)
	testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, user+" may list Nodes", func(ctx context.Context) error {
		_, err := probe.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})

		return err
	})

	runTalosCCM(t, app.Options{
		RestConfig:  identity,
		TalosConfig: srv.TalosconfigPath(),
		ConfigFile:  configFile,
		StateDir:    t.TempDir(),
		Controllers: strings.Split(args["--controllers"], ","),
		LeaderElection: app.LeaderElection{
			Enabled:   true,
			Namespace: args["--leader-elect-resource-namespace"],
			Name:      args["--leader-elect-resource-name"],
		},
		Pipeline: ccmpkg.Options{NodeLifecycle: ccmpkg.NodeLifecycleOptions{
			DeleteStaleNodes:         args["--delete-stale-nodes"] == "true",
			DeletePreemptedSpotNodes: args["--delete-preempted-spot-nodes"] == "true",
		}},
		// Off: the ports would collide with other tests; the probes are not under test here.
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
	})

	kubelets := talossim.RunTestKubelets(t, env.Config, machines)

	// One deadline for the Nodes and the certificate requests; a request refused fails the test at once.
	deadline := time.Now().Add(90 * time.Second)
	machineNames := make([]string, 0, len(machines))

	for _, m := range machines {
		machineNames = append(machineNames, m.Name)
	}

	testenv.Eventually(t, time.Until(deadline), 200*time.Millisecond, "Nodes initialized by talos-ccm running as "+user, func(ctx context.Context) error {
		require.Empty(t, recorder.requests(), "talos-ccm's requests refused by the chart's RBAC")

		return testenv.Every(machineNames, func(name string) error {
			n, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}

			if !initialized(n) {
				return errors.New("not initialized")
			}

			return nil
		})
	})

	for _, name := range machineNames {
		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.NotEmpty(t, n.Spec.ProviderID, name)
		assert.NotEmpty(t, n.Status.Addresses, name)
	}

	// Every kubelet's serving certificate request is approved: `approve` on the kubelet-serving signer is
	// checked by the apiserver's admission for the requester of the approval, here the chart's account.
	requests := map[string]string{}

	t.Cleanup(func() {
		for _, name := range requests {
			env.Clientset().CertificatesV1().CertificateSigningRequests().Delete(context.Background(), name, metav1.DeleteOptions{}) //nolint:errcheck
		}
	})

	testenv.Eventually(t, time.Until(deadline), 100*time.Millisecond, "certificate requests approved by talos-ccm running as "+user, func(ctx context.Context) error {
		require.Empty(t, recorder.requests(), "talos-ccm's requests refused by the chart's RBAC")

		return testenv.Every(machineNames, func(name string) error {
			times, _ := kubelets.Times(name)
			if times.CSRName == "" {
				return errors.New("no certificate request")
			}

			requests[name] = times.CSRName

			return csrApproved(ctx, t, env.Clientset(), times.CSRName)
		})
	})

	// talos-ccm took the chart's Lease.
	lease, err := env.Clientset().CoordinationV1().Leases(namespace).Get(t.Context(), args["--leader-elect-resource-name"], metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lease.Spec.HolderIdentity)
	assert.NotEmpty(t, *lease.Spec.HolderIdentity)

	assert.Empty(t, recorder.requests(), "talos-ccm's requests refused by the chart's RBAC")

	// A write the chart does not grant, with the same identity.
	client, err := kubernetes.NewForConfig(impersonate(env.Config, user, namespace))
	require.NoError(t, err)

	err = client.CoreV1().Nodes().Delete(t.Context(), machines[0].Name, metav1.DeleteOptions{})
	require.True(t, apierrors.IsForbidden(err), "deleting a Node with deletion off must be forbidden, got %v", err)
}

// runTalosCCM runs talos-ccm in this process with opts until the test ends; it must stop within 30s.
func runTalosCCM(t *testing.T, opts app.Options) {
	t.Helper()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)

	go func() { done <- app.Run(ctx, opts, zaptest.NewLogger(t)) }()

	t.Cleanup(func() {
		cancel()

		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("talos-ccm did not stop within 30s")
		}
	})
}

// csrApproved returns nil when the certificate request is approved, an error while it is pending, and fails
// the test if it is denied.
func csrApproved(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) error {
	t.Helper()

	csr, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}

	for _, c := range csr.Status.Conditions {
		require.NotEqual(t, certificatesv1.CertificateDenied, c.Type, "certificate request %s denied: %s", name, c.Message)

		if c.Type == certificatesv1.CertificateApproved {
			return nil
		}
	}

	return fmt.Errorf("request %s pending", name)
}

func initialized(n *corev1.Node) bool {
	for _, taint := range n.Spec.Taints {
		if taint.Key == "node.cloudprovider.kubernetes.io/uninitialized" {
			return false
		}
	}

	return true
}

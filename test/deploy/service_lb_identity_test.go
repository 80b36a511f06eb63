package deploy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// serviceLBIdentityConfig has one pool for the namespaces labelled lb-chart=yes.
const serviceLBIdentityConfig = `loadBalancer:
  pools:
    - name: chart
      addresses: ["10.40.0.1-10.40.0.4"]
      namespaceSelector:
        matchLabels: {lb-chart: "yes"}
`

// TestServiceLBRunsWithTheChartIdentity runs talos-ccm's service-lb controller alone in this process as the
// chart's service account (the chart rendered with controllers: [service-lb]), with no rights but those of
// the chart's RBAC objects, and a pool that selects namespaces by their labels: a Service of a labelled
// namespace gets its IP without a single request refused (the Services, their status, the Namespaces and
// the Events).
func TestServiceLBRunsWithTheChartIdentity(t *testing.T) {
	t.Parallel()

	env := controlPlane(t)

	const release, namespace, services = "lb", "talos-ccm-lb", "lb-chart-services"

	createNamespace(t, env, namespace)

	objects := render(t, release, namespace, nil, "controllers={service-lb}")
	user := applyIdentity(t, env, objects)
	args := argMap(podSpec(t, objects).Spec.Containers[0].Args)

	configFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(configFile, []byte(serviceLBIdentityConfig), 0o600))

	recorder := &forbiddenRecorder{}
	identity := impersonate(env.Config, user, namespace)
	identity.Wrap(recorder.wrap)

	// The identity needs its RBAC objects in force before talos-ccm starts.
	probe, err := kubernetes.NewForConfig(impersonate(env.Config, user, namespace))
	require.NoError(t, err)
	testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, user+" may list Namespaces", func(ctx context.Context) error {
		_, err := probe.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1})

		return err
	})

	runTalosCCM(t, app.Options{
		RestConfig:  identity,
		ConfigFile:  configFile,
		StateDir:    t.TempDir(),
		Controllers: strings.Split(args["--controllers"], ","),
		// Off: the ports would collide with other tests; the probes are not under test here.
		MetricsBindAddress:     "0",
		HealthProbeBindAddress: "0",
	})

	_, err = env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: services, Labels: map[string]string{"lb-chart": "yes"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = env.Clientset().CoreV1().Services(services).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	testenv.Eventually(t, 60*time.Second, 100*time.Millisecond, "the Service's IP written by talos-ccm running as "+user, func(ctx context.Context) error {
		require.Empty(t, recorder.requests(), "talos-ccm's requests refused by the chart's RBAC")

		svc, err := env.Clientset().CoreV1().Services(services).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}

		if ing := svc.Status.LoadBalancer.Ingress; len(ing) != 1 || ing[0].IP != "10.40.0.1" {
			return errors.New("no ingress 10.40.0.1 yet")
		}

		return nil
	})

	require.Empty(t, recorder.requests(), "talos-ccm's requests refused by the chart's RBAC")
}

package deploy_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestSecureMetricsWithTheChartRBAC runs talos-ccm as the chart's ServiceAccount with the chart's metrics
// flags (CSR approval only: no Talos API needed here) and scrapes it as the chart sets scrapers up: the
// account in metrics.readers reads /metrics over HTTPS, another account is refused, a request without a
// token is not authenticated, the probes answer without one, and none of talos-ccm's reviews is refused
// by the chart's RBAC.
func TestSecureMetricsWithTheChartRBAC(t *testing.T) {
	t.Parallel()

	env := controlPlane(t)

	const release, namespace = "metrics", "talos-ccm-metrics"

	createNamespace(t, env, namespace)

	objects := render(t, release, namespace, nil,
		"metrics.readers[0].kind=ServiceAccount", "metrics.readers[0].name="+scraperAccount, "metrics.readers[0].namespace="+namespace)
	user := applyIdentity(t, env, objects)
	find(t, objects, "ClusterRole", release+"-talos-ccm-metrics-reader")

	args := argMap(podSpec(t, objects).Spec.Containers[0].Args)
	require.Equal(t, "true", args["--metrics-secure"], "secure by default")

	recorder := &forbiddenRecorder{}
	identity := impersonate(env.Config, user, namespace)
	identity.Wrap(recorder.wrap)

	metricsAddr, healthAddr := freeLocalAddress(t), freeLocalAddress(t)

	runTalosCCM(t, app.Options{
		RestConfig:             identity,
		Controllers:            []string{"csr-approval"},
		MetricsBindAddress:     metricsAddr,
		HealthProbeBindAddress: healthAddr,
		MetricsInsecure:        args["--metrics-secure"] == "false",
	})

	checkSecureMetrics(t, env, namespace, metricsAddr, healthAddr)

	var refused []string

	for _, r := range recorder.requests() {
		if strings.Contains(r, "tokenreviews") || strings.Contains(r, "subjectaccessreviews") {
			refused = append(refused, r)
		}
	}

	assert.Empty(t, refused, "talos-ccm's token and access reviews refused by the chart's RBAC")
}

// scraperAccount is the service account that the end-to-end test binds to the chart's metrics-reader
// ClusterRole (metrics.readers), as a Prometheus's would be.
const scraperAccount = "prometheus"

// freeLocalAddress returns a free TCP address on the loopback interface.
func freeLocalAddress(t *testing.T) string {
	t.Helper()

	lis, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	require.NoError(t, err)

	addr := lis.Addr().String()
	require.NoError(t, lis.Close())

	return addr
}

// accountToken creates a service account in namespace (when missing) and returns a token of it.
func accountToken(t *testing.T, env *testenv.Env, namespace, name string) string {
	t.Helper()

	_, err := env.Clientset().CoreV1().ServiceAccounts(namespace).Create(t.Context(), &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: name},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	expiration := int64(3600)

	tr, err := env.Clientset().CoreV1().ServiceAccounts(namespace).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiration},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	return tr.Status.Token
}

// checkSecureMetrics scrapes a running talos-ccm as the chart sets it up: over HTTPS with its self-signed
// certificate, the scraper bound to the metrics-reader ClusterRole gets the metrics (200), another
// account is refused (403), a request without a token is not authenticated (401); the kubelet's probes
// need no token.
func checkSecureMetrics(t *testing.T, env *testenv.Env, namespace, metricsAddr, healthAddr string) {
	t.Helper()

	scraper := accountToken(t, env, namespace, scraperAccount)
	stranger := accountToken(t, env, namespace, "stranger")

	// The self-signed certificate cannot be verified: the ServiceMonitor's insecureSkipVerify.
	client := &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // self-signed.
		Timeout:   10 * time.Second,
	}

	// status returns the status of a GET of url with the token (none when ""); 0 with the error while
	// talos-ccm is not serving yet.
	status := func(url, token string) (int, error) {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		require.NoError(t, err)

		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}

		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}

		require.NoError(t, resp.Body.Close())

		return resp.StatusCode, nil
	}

	get := func(url, token string) int {
		code, _ := status(url, token)

		return code
	}

	// statusOK is a check that a GET of url with the token answers 200.
	statusOK := func(url, token string) func(context.Context) error {
		return func(context.Context) error {
			code, err := status(url, token)
			if err != nil {
				return err
			}

			if code != http.StatusOK {
				return fmt.Errorf("status %d", code)
			}

			return nil
		}
	}

	metrics := "https://" + metricsAddr + "/metrics"

	// talos-ccm starts serving, and the binding reaches the authorizer through its informers (talos-ccm
	// caches a denial briefly).
	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "the account bound to the metrics-reader ClusterRole reads /metrics",
		statusOK(metrics, scraper))

	assert.Equal(t, http.StatusForbidden, get(metrics, stranger), "an account without the role")
	assert.Equal(t, http.StatusUnauthorized, get(metrics, ""), "no token")
	assert.Equal(t, http.StatusUnauthorized, get(metrics, "not-a-token"), "a bad token")

	assert.Equal(t, http.StatusOK, get("http://"+healthAddr+"/healthz", ""), "/healthz without a token")

	// Readiness waits for the informers' caches, which may come after the first scrape.
	assert.NoError(t, testenv.WaitFor(t.Context(), 30*time.Second, 200*time.Millisecond, "/readyz without a token",
		statusOK("http://"+healthAddr+"/readyz", "")))
}

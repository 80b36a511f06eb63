package app

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// With --profiling, the metrics address also serves Go's profiles and the COSI runtime's counters; without,
// neither.
func TestProfilingEndpoints(t *testing.T) {
	t.Parallel()

	for _, profiling := range []bool{true, false} {
		addr := testenv.FreeAddress(t)

		// Plain HTTP on localhost: the endpoints are under test here, not their protection.
		require.NoError(t, startHTTP(t.Context(), Options{MetricsBindAddress: addr, HealthProbeBindAddress: "0", Profiling: profiling, MetricsInsecure: true}, &health{}, &rest.Config{}, zaptest.NewLogger(t)))

		for _, path := range []string{"/debug/vars", "/debug/pprof/"} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+path, nil)
			require.NoError(t, err)

			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)

			if !profiling {
				require.Equal(t, http.StatusNotFound, resp.StatusCode, path)
				require.NoError(t, resp.Body.Close())

				continue
			}

			require.Equal(t, http.StatusOK, resp.StatusCode, path)

			if path == "/debug/vars" {
				var vars map[string]json.RawMessage

				require.NoError(t, json.NewDecoder(resp.Body).Decode(&vars))
				require.Contains(t, vars, "qcontroller_queue_length", "the COSI runtime's counters")
			}

			require.NoError(t, resp.Body.Close())
		}
	}
}

// By default the metrics address speaks HTTPS (a self-signed certificate without --tls-cert-file) and
// refuses /metrics and the profiles without a bearer token, while the health probes answer without one, on
// their own address and on a shared one. (internal/delegatedauth tests tokens against a real apiserver.)
func TestSecureMetrics(t *testing.T) {
	t.Parallel()

	insecureTLS := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed.

	get := func(client *http.Client, url string) int {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		require.NoError(t, err)

		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())

		return resp.StatusCode
	}

	h := &health{}
	h.ready.Store(true)

	metricsAddr, probesAddr := testenv.FreeAddress(t), testenv.FreeAddress(t)
	require.NoError(t, startHTTP(t.Context(), Options{MetricsBindAddress: metricsAddr, HealthProbeBindAddress: probesAddr, Profiling: true}, h, &rest.Config{}, zaptest.NewLogger(t)))

	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/vars"} {
		assert.Equal(t, http.StatusUnauthorized, get(insecureTLS, "https://"+metricsAddr+path), path)
	}

	// Plain HTTP gets no metrics from the TLS port.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+metricsAddr+"/metrics", nil)
	require.NoError(t, err)

	if resp, err := http.DefaultClient.Do(req); err == nil {
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, "Go's TLS server answers plain HTTP with 400")
		require.NoError(t, resp.Body.Close())
	}

	for _, path := range []string{"/healthz", "/readyz"} {
		assert.Equal(t, http.StatusOK, get(http.DefaultClient, "http://"+probesAddr+path), path)
	}

	// One address for both: HTTPS, probes still without a token.
	shared := testenv.FreeAddress(t)
	require.NoError(t, startHTTP(t.Context(), Options{MetricsBindAddress: shared, HealthProbeBindAddress: shared}, h, &rest.Config{}, zaptest.NewLogger(t)))
	assert.Equal(t, http.StatusUnauthorized, get(insecureTLS, "https://"+shared+"/metrics"))
	assert.Equal(t, http.StatusOK, get(insecureTLS, "https://"+shared+"/healthz"))
	assert.Equal(t, http.StatusOK, get(insecureTLS, "https://"+shared+"/readyz"))
}

func TestValidateMetricsOptions(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		opts    Options
		wantErr string
	}{
		{opts: Options{MetricsBindAddress: ":8080"}},
		{opts: Options{MetricsBindAddress: "0", MetricsInsecure: true}},
		{opts: Options{MetricsBindAddress: "", MetricsInsecure: true}},
		{opts: Options{MetricsBindAddress: "127.0.0.1:8080", MetricsInsecure: true}},
		{opts: Options{MetricsBindAddress: "[::1]:8080", MetricsInsecure: true}},
		{opts: Options{MetricsBindAddress: "localhost:8080", MetricsInsecure: true}},
		{opts: Options{MetricsBindAddress: ":8080", MetricsInsecure: true}, wantErr: "localhost"},
		{opts: Options{MetricsBindAddress: "0.0.0.0:8080", MetricsInsecure: true}, wantErr: "localhost"},
		{opts: Options{MetricsBindAddress: "10.0.0.1:8080", MetricsInsecure: true}, wantErr: "localhost"},
		{opts: Options{MetricsBindAddress: ":8080", TLSCertFile: "tls.crt"}, wantErr: "go together"},
	} {
		err := validateMetricsOptions(tc.opts)
		if tc.wantErr == "" {
			assert.NoError(t, err, "%+v", tc.opts)
		} else {
			assert.ErrorContains(t, err, tc.wantErr, "%+v", tc.opts)
		}
	}
}

// A certificate pair from files is served, and a renewed pair replaces it without a restart.
func TestServingCertificateFiles(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")

	writePair := func(when time.Time) []byte {
		cert, err := selfSignedCertificate(when)
		require.NoError(t, err)

		key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
		require.NoError(t, err)

		require.NoError(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Certificate[0]}), 0o600))
		require.NoError(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: key}), 0o600))

		// A later modification time, as a renewal has, even on coarse file system clocks.
		require.NoError(t, os.Chtimes(certFile, when, when))
		require.NoError(t, os.Chtimes(keyFile, when, when))

		return cert.Certificate[0]
	}

	first := writePair(time.Now().Add(-time.Hour))

	cfg, err := servingTLSConfig(certFile, keyFile)
	require.NoError(t, err)

	got, err := cfg.GetCertificate(nil)
	require.NoError(t, err)
	assert.Equal(t, first, got.Certificate[0])

	second := writePair(time.Now())

	got, err = cfg.GetCertificate(nil)
	require.NoError(t, err)
	assert.Equal(t, second, got.Certificate[0])

	_, err = servingTLSConfig(filepath.Join(dir, "missing.crt"), keyFile)
	assert.Error(t, err)
}

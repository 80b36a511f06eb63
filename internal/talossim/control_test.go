package talossim_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

func TestControlAPI(t *testing.T) {
	t.Parallel()

	fleet, err := talossim.NewFleet(testMachines())
	require.NoError(t, err)

	srv := httptest.NewServer(talossim.NewControlHandler(fleet, nil))
	t.Cleanup(srv.Close)

	for _, tc := range []struct {
		method, path, body string
		code               int
		contains           string
	}{
		{method: http.MethodGet, path: "/machines", code: http.StatusOK, contains: `"name": "metal-0002"`},
		{method: http.MethodGet, path: "/machines/aws-0000", code: http.StatusOK, contains: `"providerId": "aws:///us-east-1a/i-0123456789abcdef0"`},
		{method: http.MethodGet, path: "/machines/nope", code: http.StatusNotFound, contains: "unknown machine"},
		{method: http.MethodPut, path: "/machines/aws-0000/latency", body: `{"latency":"250ms"}`, code: http.StatusOK, contains: `"latency": "250ms"`},
		{method: http.MethodPut, path: "/machines/aws-0000/latency", body: `{"latency":"soon"}`, code: http.StatusBadRequest, contains: "failed to parse latency"},
		{method: http.MethodPut, path: "/machines/aws-0000/unreachable", body: `{"unreachable":true}`, code: http.StatusOK, contains: `"unreachable": true`},
		{method: http.MethodPut, path: "/machines/aws-0000/stage", body: `{"stage":"shutting down"}`, code: http.StatusOK, contains: `"stage": "shutting down"`},
		{method: http.MethodPut, path: "/machines/aws-0000/stage", body: `{"stage":"flying"}`, code: http.StatusBadRequest, contains: "failed to parse stage"},
		{
			method: http.MethodPut, path: "/machines/gcp-0001/addresses",
			body: `[{"linkName":"eth0","prefix":"10.16.0.99/32","scope":"global"}]`, code: http.StatusOK, contains: `"prefix": "10.16.0.99/32"`,
		},
		{method: http.MethodDelete, path: "/machines/gcp-0001/resources/platformmetadata", code: http.StatusOK, contains: `"platformmetadata"`},
		{method: http.MethodDelete, path: "/machines/gcp-0001/resources/bogus", code: http.StatusBadRequest, contains: "unknown resource kind"},
		{method: http.MethodPut, path: "/machines/gcp-0001/resources/platformmetadata", code: http.StatusOK, contains: `"unreachable": false`},
		{
			method: http.MethodPost, path: "/machines",
			body: `{"name":"nocloud-0099","platform":"nocloud","nodeIPs":["10.80.0.99"]}`, code: http.StatusOK, contains: `"nocloud-0099"`,
		},
		{method: http.MethodPost, path: "/machines", body: `{"name":"nocloud-0099","platform":"nocloud"}`, code: http.StatusConflict, contains: "already in use"},
		{method: http.MethodPost, path: "/machines", body: `{"name":"x","platfrom":"aws"}`, code: http.StatusBadRequest, contains: "unknown field"}, //nolint:misspell // An unknown field on purpose.
		{method: http.MethodDelete, path: "/machines/nocloud-0099", code: http.StatusNoContent},
		{method: http.MethodGet, path: "/kubelets/times", code: http.StatusNotFound, contains: "kubelet mode is off"},
	} {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
		require.NoError(t, err)

		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)

		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())

		assert.Equal(t, tc.code, resp.StatusCode, "%s %s: %s", tc.method, tc.path, body)
		assert.Contains(t, string(body), tc.contains, "%s %s", tc.method, tc.path)
	}

	faults, err := fleet.Faults("aws-0000")
	require.NoError(t, err)
	assert.Equal(t, talossim.Faults{Latency: 250 * time.Millisecond, Unreachable: true}, faults)

	m, ok := fleet.Machine("gcp-0001")
	require.True(t, ok)
	assert.Equal(t, "10.16.0.99/32", m.Addresses[0].Prefix.String())

	var views []talossim.MachineView

	resp, err := http.Get(srv.URL + "/machines") //nolint:noctx
	require.NoError(t, err)

	defer resp.Body.Close() //nolint:errcheck

	require.NoError(t, json.NewDecoder(resp.Body).Decode(&views))
	assert.Len(t, views, 3)
}

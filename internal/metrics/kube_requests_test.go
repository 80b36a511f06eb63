package metrics

import (
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestClassifyRequest(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		method, target, contentType string
		verb, resource              string
	}{
		{method: "GET", target: "/api/v1/nodes", verb: "list", resource: "nodes"},
		{method: "GET", target: "/api/v1/nodes?watch=true&resourceVersion=5", verb: "watch", resource: "nodes"},
		{method: "GET", target: "/api/v1/nodes/w1", verb: "get", resource: "nodes"},
		{method: "PATCH", target: "/api/v1/nodes/w1/status", verb: "patch", resource: "nodes/status"},
		{method: "PATCH", target: "/api/v1/nodes/w1", contentType: "application/apply-patch+yaml", verb: "apply", resource: "nodes"},
		{method: "PUT", target: "/api/v1/nodes/w1", verb: "update", resource: "nodes"},
		{method: "PUT", target: "/apis/certificates.k8s.io/v1/certificatesigningrequests/csr-1/approval", verb: "update", resource: "certificatesigningrequests/approval"},
		{method: "POST", target: "/api/v1/namespaces/default/events", verb: "create", resource: "events"},
		{method: "PUT", target: "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/talos-ccm", verb: "update", resource: "leases"},
		{method: "DELETE", target: "/api/v1/nodes/w1", verb: "delete", resource: "nodes"},
		{method: "GET", target: "/version", verb: "get", resource: "other"},
	} {
		req := httptest.NewRequest(tc.method, tc.target, nil)
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}

		verb, resource := classifyRequest(req)

		assert.Equal(t, tc.verb, verb, tc.target)
		assert.Equal(t, tc.resource, resource, tc.target)
	}
}

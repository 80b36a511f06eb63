package talossim

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRequestDue(t *testing.T) {
	t.Parallel()

	first := []string{"node-1"}
	firstIPs := []string{"10.0.0.1"}
	all := []string{"node-1", "node-1.internal"}
	allIPs := []string{"10.0.0.1", "203.0.113.1"}

	parse := func(ips []string) []net.IP {
		out := make([]net.IP, 0, len(ips))
		for _, ip := range ips {
			out = append(out, net.ParseIP(ip))
		}

		return out
	}

	request := func(verdict requestVerdict, dnsNames, ips []string) *servingRequest {
		return &servingRequest{name: "csr-1", dnsNames: dnsNames, ips: parse(ips), verdict: verdict}
	}

	for _, tc := range []struct {
		name     string
		last     *servingRequest
		dnsNames []string
		ips      []string
		want     bool
	}{
		{"no addresses yet", nil, nil, nil, false},
		{"first addresses", nil, first, firstIPs, true},
		{"an IP only", nil, nil, firstIPs, true},
		{"pending, the Node gained addresses", request(requestPending, first, firstIPs), all, allIPs, false},
		{"approved, the same addresses", request(requestApproved, first, firstIPs), first, firstIPs, false},
		{"approved, in another order", request(requestApproved, all, allIPs), []string{"node-1.internal", "node-1"}, []string{"203.0.113.1", "10.0.0.1"}, false},
		{"approved, a name more", request(requestApproved, first, firstIPs), all, firstIPs, true},
		{"approved, an IP more", request(requestApproved, first, firstIPs), first, allIPs, true},
		{"approved, fewer addresses", request(requestApproved, all, allIPs), first, firstIPs, false},
		{"denied, the same addresses", request(requestDenied, first, firstIPs), first, firstIPs, false},
		{"denied, other addresses", request(requestDenied, all, allIPs), first, allIPs, true},
		{"denied, fewer addresses", request(requestDenied, all, allIPs), first, firstIPs, true},
		{"denied, addresses gone", request(requestDenied, all, allIPs), nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, requestDue(tc.last, tc.dnsNames, parse(tc.ips)))
		})
	}
}

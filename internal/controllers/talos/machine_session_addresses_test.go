package talos

import (
	"net/netip"
	"testing"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// TestSessionLeavesForeignAddressesOut checks that a session sends the machine's node IP exclusions (its
// shared VIP, the pod and service ranges) with its addresses, never sends the addresses of kube-ipvs0, and
// sends nothing when only kube-ipvs0 changes (a Service created in the cluster), while a change of the
// machine's own addresses is sent.
func TestSessionLeavesForeignAddressesOut(t *testing.T) {
	t.Parallel()

	m := sessionMachine("metal", "")
	m.ControlPlane = true
	m.VirtualIPs = []netip.Addr{netip.MustParseAddr("10.0.0.100")}
	m.Addresses = append(m.Addresses,
		talossim.Address{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.0.0.100/32")},
		talossim.Address{LinkName: "kube-ipvs0", Prefix: netip.MustParsePrefix("203.0.113.50/32")},
	)

	st := newCountingState(t, m)
	facts := startSession(t, st, newNodeCondition(false, false), time.Hour)

	first := awaitFacts(t, facts, "the addresses", func(f machineFacts) bool { return f.addresses != nil })
	assert.Equal(t, []string{"10.0.0.100/32", "10.0.0.5/24"}, addressSet(first.addresses), "kube-ipvs0's address is never kept")
	assert.Equal(t, []string{"10.244.0.0/16", "10.96.0.0/12", "10.0.0.100/32"}, first.addresses.GetExcludedPrefixes())

	// A Service's IP on kube-ipvs0 comes and goes: nothing is sent.
	lb := network.NewAddressStatus(network.NamespaceName, network.AddressID("kube-ipvs0", netip.MustParsePrefix("203.0.113.51/32")))
	lb.TypedSpec().Address = netip.MustParsePrefix("203.0.113.51/32")
	lb.TypedSpec().LinkName = "kube-ipvs0"
	require.NoError(t, st.Create(t.Context(), lb))
	require.NoError(t, st.Destroy(t.Context(), lb.Metadata()))

	// The machine's own new address is sent, and it is the first facts sent since the Service's IP.
	own := network.NewAddressStatus(network.NamespaceName, network.AddressID("eth0", netip.MustParsePrefix("10.0.0.6/24")))
	own.TypedSpec().Address = netip.MustParsePrefix("10.0.0.6/24")
	own.TypedSpec().LinkName = "eth0"
	require.NoError(t, st.Create(t.Context(), own))

	next := awaitFacts(t, facts, "the next facts", func(machineFacts) bool { return true })
	require.NotNil(t, next.addresses)
	assert.Equal(t, []string{"10.0.0.100/32", "10.0.0.5/24", "10.0.0.6/24"}, addressSet(next.addresses))
}

package talos

import (
	"net/netip"
	"testing"
	"unsafe"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/stretchr/testify/assert"
)

// addressOn is an address event of the AddressStatus of prefix on link, with the ID Talos gives it.
func addressOn(typ v1alpha1.EventType, link, prefix string) addressEvent {
	p := netip.MustParsePrefix(prefix)

	return addressEvent{typ: typ, id: network.AddressID(link, p), address: addressStatus{prefix: p, link: link}}
}

// The session's addresses follow the watch's events by ID, whether the ID is the one Talos derives from the
// link and the address (kept as no string) or another one (kept as it came).
func TestSessionAddressesApply(t *testing.T) {
	t.Parallel()

	var list sessionAddresses

	eth0 := addressOn(v1alpha1.EventType_CREATED, "eth0", "10.0.0.5/24")
	v6 := addressOn(v1alpha1.EventType_CREATED, "eth0", "fd00::5/64")
	odd := addressOn(v1alpha1.EventType_CREATED, "eth1", "10.1.0.5/24")
	odd.id = "eth1-primary"

	assert.True(t, list.apply(eth0))
	assert.True(t, list.apply(v6))
	assert.True(t, list.apply(odd))
	assert.False(t, list.apply(addressOn(v1alpha1.EventType_CREATED, "kube-ipvs0", "10.96.0.1/32")), "a foreign link's address is never kept")
	assert.Len(t, list.list, 3)
	assert.Equal(t, []string{"", "", "eth1-primary"}, list.ids, "the ID Talos derives is not kept, another one is kept as it came")

	// An update replaces the address of its ID.
	updated := addressOn(v1alpha1.EventType_UPDATED, "eth0", "10.0.0.5/24")
	updated.address.flags = 0x80

	assert.True(t, list.apply(updated))
	assert.Len(t, list.list, 3)
	assert.Equal(t, uint32(0x80), list.list[0].flags)

	oddUpdated := odd
	oddUpdated.typ = v1alpha1.EventType_UPDATED
	oddUpdated.address.prefix = netip.MustParsePrefix("10.1.0.6/24")

	assert.True(t, list.apply(oddUpdated))
	assert.Len(t, list.list, 3)
	assert.Equal(t, netip.MustParsePrefix("10.1.0.6/24"), list.list[2].status().prefix)

	// Destroyed by ID, derived or not; an ID not kept changes nothing.
	assert.True(t, list.apply(addressEvent{typ: v1alpha1.EventType_DESTROYED, id: eth0.id}))
	assert.False(t, list.apply(addressEvent{typ: v1alpha1.EventType_DESTROYED, id: eth0.id}))
	assert.False(t, list.apply(addressEvent{typ: v1alpha1.EventType_DESTROYED, id: "eth0/10.0.0.6/24"}))
	assert.True(t, list.apply(addressEvent{typ: v1alpha1.EventType_DESTROYED, id: "eth1-primary"}))

	compact := list.compact()
	assert.Equal(t, []addressStatus{v6.address}, compact.statuses())
}

// A machine whose every ID is the derived one keeps no ID at all.
func TestSessionAddressesDerivedIDs(t *testing.T) {
	t.Parallel()

	var list sessionAddresses

	assert.True(t, list.apply(addressOn(v1alpha1.EventType_CREATED, "eth0", "10.0.0.5/24")))
	assert.True(t, list.apply(addressOn(v1alpha1.EventType_CREATED, "eth0", "fd00::5/64")))
	assert.True(t, list.apply(addressOn(v1alpha1.EventType_DESTROYED, "eth0", "10.0.0.5/24")))
	assert.Nil(t, list.ids)
	assert.Len(t, list.list, 1)
}

// An address is kept packed, in 40 bytes, and unpacks to what it was: IPv4, IPv6, IPv4 mapped in IPv6, a
// prefix of no bits, and one that did not decode.
func TestPackedAddress(t *testing.T) {
	t.Parallel()

	assert.Equal(t, uintptr(40), unsafe.Sizeof(packedAddress{}), "the bytes every idle session keeps per address")

	for _, a := range []addressStatus{
		{prefix: netip.MustParsePrefix("10.0.0.5/24"), link: "eth0", scope: 1, family: 2, flags: 0x80},
		{prefix: netip.MustParsePrefix("2001:db8::5/64"), link: "eth0", scope: 3, family: 10},
		{prefix: netip.MustParsePrefix("::ffff:203.0.113.1/120"), link: "external"},
		{prefix: netip.MustParsePrefix("0.0.0.0/0"), link: "eth1"},
		{prefix: netip.MustParsePrefix("::/0"), link: "eth1"},
		{prefix: netip.MustParsePrefix("2001:db8::1/128"), link: "lo"},
		{link: "bad0"},
	} {
		packed := packAddress(a)
		assert.Equal(t, a, packed.status(), "%s on %s", a.prefix, a.link)
	}
}

// Matching an event's ID against the addresses kept allocates nothing: it runs for every address on every
// event of every machine.
func TestDerivedIDAllocatesNothing(t *testing.T) {
	ev := addressOn(v1alpha1.EventType_CREATED, "enp0s31f6", "2001:db8:1234:5678:9abc:def0:1234:5678/64")

	assert.True(t, derivedID(ev.id, ev.address))
	assert.False(t, derivedID("enp0s31f6/2001:db8::1/64", ev.address))
	assert.False(t, derivedID(ev.id, addressStatus{link: "enp0s31f6"}), "an address that did not decode derives no ID")
	assert.Zero(t, testing.AllocsPerRun(100, func() { derivedID(ev.id, ev.address) }))

	var list sessionAddresses

	list.apply(ev)
	assert.Zero(t, testing.AllocsPerRun(100, func() { list.index("enp0s31f6/2001:db8::1/64") }))
}

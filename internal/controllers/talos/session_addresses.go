package talos

import (
	"net/netip"
	"slices"

	"github.com/cosi-project/runtime/api/v1alpha1"

	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
)

// sessionAddresses are what a session keeps of its machine's AddressStatuses, in the order they came: a
// slice, not a map by ID, packed (see packedAddress), and without the IDs that Talos derives from the link
// and the address (all of them, from a Talos machine), since every idle session holds its machine's
// addresses for as long as it lasts. A handful of addresses take about 200 bytes this way, where a map by ID
// with the decoded IDs took over a kilobyte.
type sessionAddresses struct {
	list []packedAddress
	// ids are the IDs of list's addresses, in its order, when one is not the ID Talos derives from its link
	// and address (see derivedID): "" for those that are. Nil while every ID is derived.
	ids []string
}

// packedAddress is one AddressStatus a session keeps, in 40 bytes where an addressStatus takes 56: its
// address as 16 bytes and a family, not a netip.Addr (whose zone pointer an AddressStatus never uses).
type packedAddress struct {
	link string
	ip   [16]byte
	// kind is 4 or 6 for an address of that family (an IPv4 address in the last 4 bytes of ip), 0 for one
	// that did not decode.
	kind          uint8
	bits          uint8
	scope, family uint8
	flags         uint32
}

// packAddress packs a.
func packAddress(a addressStatus) packedAddress {
	out := packedAddress{link: a.link, scope: a.scope, family: a.family, flags: a.flags}

	if a.prefix.IsValid() {
		addr := a.prefix.Addr()
		out.ip = addr.As16()
		out.bits = uint8(a.prefix.Bits()) //nolint:gosec // A valid prefix has at most 128 bits.

		out.kind = 6
		if addr.Is4() {
			out.kind = 4
		}
	}

	return out
}

// status unpacks the address.
func (p *packedAddress) status() addressStatus {
	out := addressStatus{link: p.link, scope: p.scope, family: p.family, flags: p.flags}

	switch p.kind {
	case 4:
		out.prefix = netip.PrefixFrom(netip.AddrFrom4([4]byte(p.ip[12:])), int(p.bits))
	case 6:
		out.prefix = netip.PrefixFrom(netip.AddrFrom16(p.ip), int(p.bits))
	}

	return out
}

// apply applies one event of the address watch, and says whether the addresses changed. Addresses of links
// that hold other things' addresses (kube-ipvs0, which holds every Service IP of the cluster, and the
// others nodeaddress.ForeignLink names) are never kept: they are not the machine's, and a Service created
// or deleted would otherwise change every machine's addresses.
func (list *sessionAddresses) apply(ev addressEvent) bool {
	i := list.index(ev.id)

	switch ev.typ {
	case v1alpha1.EventType_CREATED, v1alpha1.EventType_UPDATED:
		if nodeaddress.ForeignLink(ev.address.link) {
			return false
		}

		id := ""
		if !derivedID(ev.id, ev.address) {
			id = ev.id
		}

		if i < 0 {
			i = len(list.list)
			list.list = append(list.list, packAddress(ev.address))

			if list.ids != nil {
				list.ids = append(list.ids, "")
			}
		} else {
			list.list[i] = packAddress(ev.address)
		}

		list.setID(i, id)

		return true
	case v1alpha1.EventType_DESTROYED:
		if i < 0 {
			return false
		}

		list.list = slices.Delete(list.list, i, i+1)

		if list.ids != nil {
			list.ids = slices.Delete(list.ids, i, i+1)
		}

		return true
	case v1alpha1.EventType_BOOTSTRAPPED, v1alpha1.EventType_NOOP, v1alpha1.EventType_ERRORED: // next fails on Errored.
	}

	return false
}

// setID records the ID of the address at i: "" for the derived one.
func (list *sessionAddresses) setID(i int, id string) {
	if list.ids == nil {
		if id == "" {
			return
		}

		list.ids = make([]string, len(list.list))
	}

	list.ids[i] = id
}

// index returns the index of the address of ID id, or -1.
func (list *sessionAddresses) index(id string) int {
	for i := range list.list {
		if list.ids != nil && list.ids[i] != "" {
			if list.ids[i] == id {
				return i
			}

			continue
		}

		if derivedID(id, list.list[i].status()) {
			return i
		}
	}

	return -1
}

// statuses returns the addresses kept.
func (list *sessionAddresses) statuses() []addressStatus {
	out := make([]addressStatus, len(list.list))
	for i := range list.list {
		out[i] = list.list[i].status()
	}

	return out
}

// compact returns a copy of the addresses in slices of their number: those appended to hold room for more.
func (list *sessionAddresses) compact() sessionAddresses {
	return sessionAddresses{list: slices.Clone(list.list), ids: slices.Clone(list.ids)}
}

// derivedID reports whether id is the ID Talos gives the AddressStatus of a: its link and its address,
// "eth0/10.0.0.1/24" (machinery's network.AddressID). It allocates nothing: it runs for every address kept
// on every event.
func derivedID(id string, a addressStatus) bool {
	if !a.prefix.IsValid() {
		return false
	}

	var buf [64]byte

	derived := append(buf[:0], a.link...)
	derived = append(derived, '/')
	derived = a.prefix.AppendTo(derived)

	return string(derived) == id
}

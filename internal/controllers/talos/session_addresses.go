package talos

import (
	"slices"

	"github.com/cosi-project/runtime/api/v1alpha1"

	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
)

// sessionAddresses are what a session keeps of its machine's AddressStatuses, in the order they came: a
// slice, not a map by ID, and without the IDs that Talos derives from the link and the address (all of
// them, from a Talos machine), since every idle session holds its machine's addresses for as long as it
// lasts. A handful of addresses take a few hundred bytes this way, where a map by ID with the decoded IDs
// took over a kilobyte.
type sessionAddresses []sessionAddress

// sessionAddress is one AddressStatus a session keeps.
type sessionAddress struct {
	addressStatus
	// id is the AddressStatus's ID when it is not the one Talos derives from its link and address (see
	// derivedID); empty when it is.
	id string
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

		entry := sessionAddress{addressStatus: ev.address}
		if !derivedID(ev.id, ev.address) {
			entry.id = ev.id
		}

		if i < 0 {
			*list = append(*list, entry)
		} else {
			(*list)[i] = entry
		}

		return true
	case v1alpha1.EventType_DESTROYED:
		if i < 0 {
			return false
		}

		*list = slices.Delete(*list, i, i+1)

		return true
	case v1alpha1.EventType_BOOTSTRAPPED, v1alpha1.EventType_NOOP, v1alpha1.EventType_ERRORED: // next fails on Errored.
	}

	return false
}

// index returns the index of the address of ID id, or -1.
func (list sessionAddresses) index(id string) int {
	return slices.IndexFunc(list, func(a sessionAddress) bool {
		if a.id != "" {
			return a.id == id
		}

		return derivedID(id, a.addressStatus)
	})
}

// statuses returns the addresses kept.
func (list sessionAddresses) statuses() []addressStatus {
	out := make([]addressStatus, len(list))
	for i, a := range list {
		out[i] = a.addressStatus
	}

	return out
}

// compact returns the addresses in a slice of their number: the one appended to holds room for more.
func (list sessionAddresses) compact() sessionAddresses {
	return slices.Clone(list)
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

package talos

import (
	"net/netip"
	"sync"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// maxSharedAddresses bounds the address facts shared: a machine has one or two loopback addresses
// (127.0.0.1/8 and ::1/128 on its lo link), the same on every machine.
const maxSharedAddresses = 64

// sharedAddresses are the address facts that every machine has alike, its loopback addresses: every
// machine's facts hold the one message of each (MachineAddresses copies share their messages), where each
// held messages of its own, about 350 bytes per machine. Nobody changes an address fact in place.
var sharedAddresses = struct {
	sync.Mutex

	byKey map[sharedAddressKey]*specs.MachineAddress
}{byKey: map[sharedAddressKey]*specs.MachineAddress{}}

// sharedAddressKey is what an address fact is made of.
type sharedAddressKey struct {
	prefix        netip.Prefix
	link          string
	scope, family uint8
	flags         uint32
}

// addressFact returns the address fact of s, whose prefix is prefix: for a loopback address, the one message
// every machine's facts hold (while there is room for it); else a message of its own.
func addressFact(s addressStatus, prefix netip.Prefix) *specs.MachineAddress {
	if !prefix.Addr().IsLoopback() {
		return newAddressFact(s, prefix)
	}

	key := sharedAddressKey{prefix: prefix, link: s.link, scope: s.scope, family: s.family, flags: s.flags}

	sharedAddresses.Lock()
	defer sharedAddresses.Unlock()

	if held, ok := sharedAddresses.byKey[key]; ok {
		return held
	}

	fact := newAddressFact(s, prefix)

	if len(sharedAddresses.byKey) < maxSharedAddresses {
		sharedAddresses.byKey[key] = fact
	}

	return fact
}

// newAddressFact returns the address fact of s, whose prefix is prefix, as a message of its own.
func newAddressFact(s addressStatus, prefix netip.Prefix) *specs.MachineAddress {
	return &specs.MachineAddress{
		Address:  prefix.String(),
		LinkName: clean(s.link),
		Scope:    scopeText(s.scope),
		Family:   familyText(s.family),
		Flags:    addressFlagList(s.flags),
	}
}

// Package ipam holds the IP allocators: pod CIDRs of Nodes (cluster ranges, or segments of each machine's
// own IPv6 prefix) and LoadBalancer IPs of Services (pools from the config file).
//
// Each allocator is one controller that owns every allocation of its kind, so that two owners can never
// be handed the same block: it decides from its persisted IPAllocations and from what the Kubernetes
// objects already carry (a Node's spec.podCIDRs, a Service's status.loadBalancer.ingress). A Node's
// spec.podCIDRs may be the kubelet's own claim, set at registration: it is adopted only as one free block
// per family, never over a decision not applied yet. The decisions are pure functions (PlanNodeCIDRs,
// PlanServiceIPs) of those inputs; the controllers only gather the inputs and write what changed.
package ipam

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// maxConflictsListed bounds the conflicts an IPPool lists; the count is in the Conflict condition.
const maxConflictsListed = 50

// withSince keeps the since time of the previous decision when the decision is the same, so that a
// re-plan with nothing new writes nothing.
func withSince(next, prev *specs.IPAllocationSpec, now time.Time) *specs.IPAllocationSpec {
	if prev != nil && prev.GetSince() != nil && prev.GetState() == next.GetState() && prev.GetAddress() == next.GetAddress() &&
		prev.GetReason() == next.GetReason() {
		next.Since = prev.GetSince()

		return next
	}

	next.Since = timestamppb.New(now)

	return next
}

// poolSpec renders a pool's state as an IPPoolSpec.
func poolSpec(p *pool) *specs.IPPoolSpec {
	out := &specs.IPPoolSpec{
		Purpose:   p.purpose,
		Family:    p.family,
		BlockBits: int32(p.blockBits), //nolint:gosec // At most 128.
		Source:    p.source,
		Next:      p.next,
	}

	for _, r := range p.ranges {
		out.Ranges = append(out.Ranges, r.String())
	}

	for _, e := range p.excluded {
		out.Excluded = append(out.Excluded, e.String())
	}

	if p.invalid == "" {
		out.Size = p.size()
		out.Used = uint64(len(p.taken))
		out.Free = out.Size - min(out.Used, out.Size)
	}

	exhausted := condition(ipam.ConditionExhausted, false, "FreeBlocks", "")

	switch {
	case p.invalid != "":
		exhausted = condition(ipam.ConditionExhausted, true, "Invalid", p.invalid)
	case p.exhausted || out.Free == 0:
		exhausted = condition(ipam.ConditionExhausted, true, "NoFreeBlock", "every block of the pool is held")
	}

	conflicts := slices.Clone(p.conflicts)
	slices.Sort(conflicts)

	conflict := condition(ipam.ConditionConflict, false, "NoConflict", "")
	if len(conflicts) > 0 {
		conflict = condition(ipam.ConditionConflict, true, "AddressesInConflict", conflictMessage(len(conflicts)))
	}

	out.Conditions = []*specs.IPPoolCondition{exhausted, conflict}
	out.Conflicts = conflicts[:min(len(conflicts), maxConflictsListed)]

	return out
}

func conflictMessage(n int) string {
	if n == 1 {
		return "1 owner uses an address outside the pool or held by another"
	}

	return strconv.Itoa(n) + " owners use addresses outside the pool or held by others"
}

func condition(typ string, status bool, reason, message string) *specs.IPPoolCondition {
	s := "False"
	if status {
		s = "True"
	}

	return &specs.IPPoolCondition{Type: typ, Status: s, Reason: reason, Message: message}
}

// byAge orders owners by creation time, then name: the older owner wins a contested address, and
// allocation order is stable.
func byAge(aCreated, bCreated time.Time, aName, bName string) int {
	if c := aCreated.Compare(bCreated); c != 0 {
		return c
	}

	return cmp.Compare(aName, bName)
}

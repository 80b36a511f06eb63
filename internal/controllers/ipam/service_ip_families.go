package ipam

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// serviceFamilies are the families a Service gets an IP of: those of spec.ipFamilies, only the first for
// a SingleStack Service (the apiserver always sets the policy; without one, every family listed).
func serviceFamilies(svc *ServiceFacts) []string {
	var out []string

	for _, f := range svc.Families {
		family := strings.ToLower(f)
		if (family == ipam.FamilyIPv4 || family == ipam.FamilyIPv6) && !slices.Contains(out, family) {
			out = append(out, family)
		}
	}

	switch {
	case len(out) == 0:
		out = []string{ipam.FamilyIPv4}
	case svc.IPFamilyPolicy == string(corev1.IPFamilyPolicySingleStack):
		out = out[:1]
	}

	return out
}

// requireDualStack gives a RequireDualStack Service an IP of every family or none: when one family failed,
// the IPs its other families were given in this plan are taken back, and their allocations fail with the
// reason. An IP the Service held before (kept from the previous plan or taken back from its status) is
// never taken away. tasks are the decided tasks of whole Services, in order.
func (p *servicePlanner) requireDualStack(tasks []serviceTask) {
	for start := 0; start < len(tasks); {
		svc := tasks[start].svc

		end := start
		for end < len(tasks) && tasks[end].svc == svc {
			end++
		}

		family := tasks[start:end]
		start = end

		if svc.IPFamilyPolicy != string(corev1.IPFamilyPolicyRequireDualStack) {
			continue
		}

		i := slices.IndexFunc(family, func(t serviceTask) bool { return p.decided[t.id].GetState() != ipam.StateAllocated })
		if i < 0 {
			continue
		}

		failed := family[i]
		reason := "RequireDualStack: the Service gets an IP of every family or none, and it gets no " + failed.family + " IP: " +
			p.decided[failed.id].GetReason()

		for _, t := range family {
			alloc := p.decided[t.id]
			if alloc.GetState() != ipam.StateAllocated || p.heldBefore(t, alloc) {
				continue
			}

			p.untake(t, netip.MustParseAddr(alloc.GetAddress()))
			p.decided[t.id] = failure(ipam.CauseDualStackIncomplete, reason)
		}
	}
}

// heldBefore reports whether the Service held the allocated address before this plan.
func (p *servicePlanner) heldBefore(t serviceTask, alloc *specs.IPAllocationSpec) bool {
	if alloc.GetOrigin() == ipam.OriginIngress {
		return true
	}

	prev := p.in.Previous[t.id]

	return prev.GetState() == ipam.StateAllocated && prev.GetAddress() == alloc.GetAddress() && prev.GetOwnerUid() == t.svc.UID
}

// untake gives back an IP the Service took in this plan; Services that share it keep it.
func (p *servicePlanner) untake(t serviceTask, ip netip.Addr) {
	holders := slices.DeleteFunc(p.holders[ip], func(h ipHolder) bool { return h.service == t.svc.Key })
	if len(holders) == 0 {
		delete(p.holders, ip)
	} else {
		p.holders[ip] = holders
	}

	for _, pl := range p.pools {
		if pl.taken[ip] != "Service/"+t.svc.Key {
			continue
		}

		if len(holders) == 0 {
			delete(pl.taken, ip)
		} else {
			pl.taken[ip] = "Service/" + holders[0].service
		}
	}
}

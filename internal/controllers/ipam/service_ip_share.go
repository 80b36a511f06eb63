package ipam

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// Traffic policies of spec.externalTrafficPolicy.
const (
	trafficPolicyCluster = "Cluster"
	trafficPolicyLocal   = "Local"
)

// ipHolder is one Service holding an IP, with what decides whether another Service may share it.
type ipHolder struct {
	service    string
	namespace  string
	sharingKey string
	ports      []string
	policy     string
	selector   map[string]string
	// sharesWith are the other namespaces the Service shares its IP with ("*": every namespace).
	sharesWith []string
	// heldBefore is set when the Service held the IP before this plan too (ipsHeldBefore): only a share
	// between two such Services is one made before, which keepable keeps although a newer rule refuses it.
	heldBefore bool
}

func holderOf(svc *ServiceFacts) ipHolder {
	return ipHolder{
		service: svc.Key, namespace: svc.Namespace, sharingKey: sharingKey(svc), ports: svc.Ports,
		policy: cmp.Or(svc.ExternalTrafficPolicy, trafficPolicyCluster), selector: svc.Selector,
		sharesWith: strings.FieldsFunc(svc.Annotations[kubekeys.AnnotationSharingNamespaces], func(r rune) bool { return r == ',' || r == ' ' }),
	}
}

func sharingKey(svc *ServiceFacts) string {
	return strings.TrimSpace(svc.Annotations[kubekeys.AnnotationSharingKey])
}

// allows reports whether the holder shares its IP with Services of the namespace.
func (h ipHolder) allows(namespace string) bool {
	return h.namespace == namespace || slices.Contains(h.sharesWith, namespace) || slices.Contains(h.sharesWith, "*")
}

// shareable says why ip cannot be held by svc too; empty when it can: it is free, or held only by Services
// that may share it with svc. Services may share an IP when they have the same sharing key, no port
// (protocol and port) in common, the same externalTrafficPolicy and, for Local, the same selector (the IP
// must lead to the same nodes), and, across namespaces, when each names the other's namespace in
// AnnotationSharingNamespaces. The reason names the rule that refused the share.
func (p *servicePlanner) shareable(ip netip.Addr, svc *ServiceFacts) string {
	return p.refused(ip, svc, refusal)
}

// keepable is shareable for an IP the Service held already (in the previous plan or in its status): a share
// that only the rules newer than the share itself refuse (across namespaces without the opt-in of both,
// another traffic policy, or for Local another selector: waivedRules) is kept (keptRefusal), and flagged by
// flagKeptShares, unless the Service gives the IP up with AnnotationReleaseLoadBalancerIP.
func (p *servicePlanner) keepable(ip netip.Addr, svc *ServiceFacts) string {
	if released(svc) {
		if h, ok := p.claimedAgainstRules(ip, svc); ok {
			return fmt.Sprintf("%s is released (%s) from a share with Service %s that the sharing rules refuse", ip,
				kubekeys.AnnotationReleaseLoadBalancerIP, h)
		}

		return p.shareable(ip, svc)
	}

	// The newer rules are waived only towards Services that held the IP before this plan as well: a Service
	// that took it in this plan (a request, a new IP) has no share from before to keep.
	return p.refused(ip, svc, func(a, b ipHolder) string {
		if a.heldBefore {
			return keptRefusal(a, b)
		}

		return refusal(a, b)
	})
}

// refused says why a rule refuses that svc holds ip too, with the Services holding it; empty when none does.
func (p *servicePlanner) refused(ip netip.Addr, svc *ServiceFacts, rule func(a, b ipHolder) string) string {
	me := holderOf(svc)

	for _, h := range p.holders[ip] {
		if h.service == svc.Key {
			continue
		}

		if why := rule(h, me); why != "" {
			return fmt.Sprintf("%s is held by Service %s %s", ip, h.service, why)
		}
	}

	return ""
}

// released reports whether the operator gives up the IP the Service keeps (AnnotationReleaseLoadBalancerIP).
func released(svc *ServiceFacts) bool {
	return strings.EqualFold(strings.TrimSpace(svc.Annotations[kubekeys.AnnotationReleaseLoadBalancerIP]), "true")
}

// missingOptIns says which namespace opt-ins a share of Services a and b lacks, empty when it lacks none.
func missingOptIns(a, b ipHolder) []string {
	var out []string

	for _, pair := range [][2]ipHolder{{a, b}, {b, a}} {
		if !pair[0].allows(pair[1].namespace) {
			out = append(out, fmt.Sprintf("Service %s does not name namespace %s", pair[0].service, pair[1].namespace))
		}
	}

	return out
}

// incompatibility says why Service b may not share the IP Service a holds for where the IP leads (another
// externalTrafficPolicy or, for Local, another selector), as the end of a sentence that starts with the IP
// and a; empty when nothing does.
func incompatibility(a, b ipHolder) string {
	switch {
	case a.policy != b.policy:
		return fmt.Sprintf("with externalTrafficPolicy %s, not %s (Services share an IP only with the same policy)", a.policy, b.policy)
	case a.policy == trafficPolicyLocal && !maps.Equal(a.selector, b.selector):
		return "with another selector (Services with externalTrafficPolicy Local share an IP only with the same selector, " +
			"so that the IP leads to the same nodes)"
	}

	return ""
}

// waivedRules says which of the rules newer than a share of Services a and b it breaks: the opt-ins it
// lacks across namespaces (missingOptIns), and the incompatibility of their traffic policies or selectors.
func waivedRules(a, b ipHolder) (optIns []string, incompatible string) {
	return missingOptIns(a, b), incompatibility(a, b)
}

// claimedAgainstRules returns a Service, not released itself, that held ip already (in the previous plan or
// in its status) and that svc may share it with only as a share made before (waivedRules): a Service
// released from such a share moves, whichever of the two is older.
func (p *servicePlanner) claimedAgainstRules(ip netip.Addr, svc *ServiceFacts) (string, bool) {
	me := holderOf(svc)

	for i := range p.in.Services {
		other := &p.in.Services[i]
		if other.Key == svc.Key || !ipam.Serves(other.Class) || released(other) {
			continue
		}

		if optIns, incompatible := waivedRules(holderOf(other), me); len(optIns) == 0 && incompatible == "" {
			continue
		}

		if slices.ContainsFunc(p.ipsHeldBefore(other), func(a netip.Addr) bool { return a == ip }) {
			return other.Key, true
		}
	}

	return "", false
}

// ipsHeldBefore are the IPs a Service held before this plan: those of its previous allocations and those of its
// status.loadBalancer.ingress.
func (p *servicePlanner) ipsHeldBefore(svc *ServiceFacts) []netip.Addr {
	var out []netip.Addr

	for _, family := range []string{ipam.FamilyIPv4, ipam.FamilyIPv6} {
		prev := p.in.Previous[ipam.ServiceAllocationID(svc.Key, family)]
		if ip, err := netip.ParseAddr(prev.GetAddress()); err == nil && prev.GetState() == ipam.StateAllocated && prev.GetOwnerUid() == svc.UID {
			out = append(out, ip.Unmap())
		}
	}

	for _, s := range svc.IngressIPs {
		if ip, err := netip.ParseAddr(s); err == nil {
			out = append(out, ip.Unmap())
		}
	}

	return out
}

// flagKeptShares sets a warning on every allocated IP that its Service shares only as a share made before
// (kept by keepable), saying which rule refuses it and what to do: WarningSharedWithoutOptIn with a Service
// of another namespace without the opt-in of both, else WarningIncompatibleShare with a Service of another
// traffic policy or selector. An IP kept with another warning gets the rules in its reason.
func (p *servicePlanner) flagKeptShares(tasks []serviceTask) {
	for _, t := range tasks {
		alloc := p.decided[t.id]

		ip, err := netip.ParseAddr(alloc.GetAddress())
		if err != nil || alloc.GetState() != ipam.StateAllocated {
			continue
		}

		var missing, withoutOptIn, incompatible []string

		me := holderOf(t.svc)

		for _, h := range p.holders[ip] {
			if h.service == t.svc.Key {
				continue
			}

			optIns, why := waivedRules(h, me)
			if len(optIns) > 0 {
				missing, withoutOptIn = append(missing, optIns...), append(withoutOptIn, h.service)
			}

			if why != "" {
				incompatible = append(incompatible, fmt.Sprintf("%s is held by Service %s %s", ip, h.service, why))
			}
		}

		for _, w := range []struct{ warning, why string }{
			{ipam.WarningSharedWithoutOptIn, withoutOptInReason(ip, withoutOptIn, missing)},
			{ipam.WarningIncompatibleShare, incompatibleShareReason(incompatible)},
		} {
			switch {
			case w.why == "":
			case alloc.Warning != "":
				alloc.Reason += "; also, " + w.why
			default:
				alloc.Warning, alloc.Reason = w.warning, "the Service keeps its IP: "+w.why
			}
		}
	}
}

// withoutOptInReason says why a Service keeps sharing ip with the Services others of other namespaces
// without the opt-ins missing, and what to do; empty when there are none.
func withoutOptInReason(ip netip.Addr, others, missing []string) string {
	if len(missing) == 0 {
		return ""
	}

	return fmt.Sprintf("%s is shared with Service %s of another namespace without the opt-in of both (%s in %s): "+
		"a share made before talos-ccm required it, or whose opt-in was removed; it is kept, and no new Service joins it "+
		"without the opt-in. To keep the share, annotate every Service of it with %s naming the others' namespaces (or *); "+
		"to move this Service to a new IP, annotate it %s: \"true\"", ip, strings.Join(others, ", "), strings.Join(missing, "; "),
		kubekeys.AnnotationSharingNamespaces, kubekeys.AnnotationSharingNamespaces, kubekeys.AnnotationReleaseLoadBalancerIP)
}

// incompatibleShareReason says why a Service keeps sharing its IP with Services of another traffic policy or
// selector (incompatible, each as incompatibility words it), and what to do; empty when there are none.
func incompatibleShareReason(incompatible []string) string {
	if len(incompatible) == 0 {
		return ""
	}

	return strings.Join(incompatible, "; ") + ": a share made before talos-ccm checked traffic policies and selectors, " +
		"or whose Services changed since; it is kept, and no new Service joins it unless compatible with every Service " +
		"of it. To split it, annotate one of its Services " + kubekeys.AnnotationReleaseLoadBalancerIP + ": \"true\" " +
		"(it moves to a new IP, the others keep theirs)"
}

// refusal says why Service b may not share the IP Service a holds, as the end of a sentence that starts
// with the IP and a; empty when it may.
func refusal(a, b ipHolder) string {
	switch {
	case a.sharingKey == "" || b.sharingKey == "":
		return fmt.Sprintf("(Services share an IP only with the same %s annotation)", kubekeys.AnnotationSharingKey)
	case a.sharingKey != b.sharingKey:
		return "with another sharing key"
	case !b.allows(a.namespace):
		return fmt.Sprintf("in another namespace, which Service %s does not name in %s (Services in other namespaces "+
			"share an IP only when each names the other's namespace, or *)", b.service, kubekeys.AnnotationSharingNamespaces)
	case !a.allows(b.namespace):
		return fmt.Sprintf("in another namespace, which does not name namespace %s in %s (Services in other namespaces "+
			"share an IP only when each names the other's namespace, or *)", b.namespace, kubekeys.AnnotationSharingNamespaces)
	}

	if why := incompatibility(a, b); why != "" {
		return why
	}

	return keptRefusal(a, b)
}

// keptRefusal is refusal without the rules newer than the shares an older talos-ccm made (waivedRules): it
// says why Service b may not keep sharing an IP it held already with Service a. A share across namespaces
// without the opt-in of both, or between Services of other traffic policies or (for Local) selectors (one
// an older talos-ccm made on the sharing key and the ports alone, or one whose Services changed since), is
// kept, with a warning, as an assigned IP is never taken away silently; another key or a port in common
// still split it.
func keptRefusal(a, b ipHolder) string {
	switch {
	case a.sharingKey == "" || b.sharingKey == "":
		return fmt.Sprintf("(Services share an IP only with the same %s annotation)", kubekeys.AnnotationSharingKey)
	case a.sharingKey != b.sharingKey:
		return "with another sharing key"
	}

	for _, port := range b.ports {
		if slices.Contains(a.ports, port) {
			return "which already uses port " + port + " on it"
		}
	}

	return ""
}

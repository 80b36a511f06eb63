package ipam

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

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
}

func holderOf(svc *ServiceFacts) ipHolder {
	return ipHolder{
		service: svc.Key, namespace: svc.Namespace, sharingKey: sharingKey(svc), ports: svc.Ports,
		policy: cmp.Or(svc.ExternalTrafficPolicy, trafficPolicyCluster), selector: svc.Selector,
		sharesWith: strings.FieldsFunc(svc.Annotations[ipam.AnnotationSharingNamespaces], func(r rune) bool { return r == ',' || r == ' ' }),
	}
}

func sharingKey(svc *ServiceFacts) string {
	return strings.TrimSpace(svc.Annotations[ipam.AnnotationSharingKey])
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
	me := holderOf(svc)

	for _, h := range p.holders[ip] {
		if h.service == svc.Key {
			continue
		}

		if why := refusal(h, me); why != "" {
			return fmt.Sprintf("%s is held by Service %s %s", ip, h.service, why)
		}
	}

	return ""
}

// refusal says why Service b may not share the IP Service a holds, as the end of a sentence that starts
// with the IP and a; empty when it may.
func refusal(a, b ipHolder) string {
	switch {
	case a.sharingKey == "" || b.sharingKey == "":
		return fmt.Sprintf("(Services share an IP only with the same %s annotation)", ipam.AnnotationSharingKey)
	case a.sharingKey != b.sharingKey:
		return "with another sharing key"
	case !b.allows(a.namespace):
		return fmt.Sprintf("in another namespace, which Service %s does not name in %s (Services in other namespaces "+
			"share an IP only when each names the other's namespace, or *)", b.service, ipam.AnnotationSharingNamespaces)
	case !a.allows(b.namespace):
		return fmt.Sprintf("in another namespace, which does not name namespace %s in %s (Services in other namespaces "+
			"share an IP only when each names the other's namespace, or *)", b.namespace, ipam.AnnotationSharingNamespaces)
	case a.policy != b.policy:
		return fmt.Sprintf("with externalTrafficPolicy %s, not %s (Services share an IP only with the same policy)", a.policy, b.policy)
	case a.policy == trafficPolicyLocal && !maps.Equal(a.selector, b.selector):
		return "with another selector (Services with externalTrafficPolicy Local share an IP only with the same selector, " +
			"so that the IP leads to the same nodes)"
	}

	for _, port := range b.ports {
		if slices.Contains(a.ports, port) {
			return "which already uses port " + port + " on it"
		}
	}

	return ""
}

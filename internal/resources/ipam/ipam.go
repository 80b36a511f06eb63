// Package ipam holds the IP allocations (pod CIDRs of Nodes, LoadBalancer IPs of Services) and the pools
// they come from.
package ipam

import (
	"net/netip"

	"github.com/cosi-project/runtime/pkg/resource"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// NamespaceName is the default namespace of the ipam group.
const NamespaceName resource.Namespace = "ipam"

// Address families, as IPAllocation and IPPool name them.
const (
	FamilyIPv4 = "ipv4"
	FamilyIPv6 = "ipv6"
)

// FamilyOf names the family of an address.
func FamilyOf(a netip.Addr) string {
	if a.Is4() {
		return FamilyIPv4
	}

	return FamilyIPv6
}

// Pod CIDR modes (--node-ipam-mode).
const (
	// ModeRange hands out pod CIDRs from the cluster ranges, one per family.
	ModeRange = "range"
	// ModeTalosIPv6 carves each Node's IPv6 pod CIDR out of its machine's own global IPv6 prefix; IPv4
	// comes from the cluster range.
	ModeTalosIPv6 = "talos-ipv6"
)

// Default node CIDR mask sizes.
const (
	DefaultMaskIPv4          = 24
	DefaultMaskIPv6          = 64
	DefaultMaskIPv6TalosMode = 80
)

// Other load balancers whose IP-request annotations talos-ccm reads when the config file's
// loadBalancer.requestAnnotations names them, for a migration without renumbering.
const (
	// RequestAnnotationsMetalLB reads kubekeys.AnnotationMetalLBIPs.
	RequestAnnotationsMetalLB = "metallb"
	// RequestAnnotationsCilium reads kubekeys.AnnotationCiliumIPs.
	RequestAnnotationsCilium = "cilium"
)

// IP modes of a LoadBalancer IP, as Kubernetes spells them in status.loadBalancer.ingress[].ipMode.
const (
	// IPModeVIP: the load balancer delivers packets with the IP as their destination (the default).
	IPModeVIP = "VIP"
	// IPModeProxy: the load balancer delivers packets with its own address as their destination, so that
	// kube-proxy must not short-circuit the IP inside the cluster.
	IPModeProxy = "Proxy"
)

// Serves reports whether talos-ccm hands out the IPs of a Service with this spec.loadBalancerClass.
func Serves(class string) bool {
	return class == "" || class == kubekeys.LoadBalancerClass
}

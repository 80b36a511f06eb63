// Package ipam holds the IP allocations (pod CIDRs of Nodes, LoadBalancer IPs of Services) and the pools
// they come from.
package ipam

import (
	"net/netip"

	"github.com/cosi-project/runtime/pkg/resource"
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

// LoadBalancerClass is talos-ccm's spec.loadBalancerClass: Services of type LoadBalancer with this class, or
// with none, get their IPs from talos-ccm's pools.
const LoadBalancerClass = "talos-ccm.dev/lb"

// Service annotations.
const (
	// AnnotationLoadBalancerIPs asks for specific IPs, one per family, separated by commas.
	AnnotationLoadBalancerIPs = "talos-ccm.dev/load-balancer-ips"
	// AnnotationSharingKey lets Services with the same key share an IP when their ports differ.
	AnnotationSharingKey = "talos-ccm.dev/sharing-key"
	// AnnotationSharingNamespaces names the other namespaces (comma-separated, or "*" for all) whose
	// Services may share the Service's IP; a share across namespaces needs it on every Service involved.
	AnnotationSharingNamespaces = "talos-ccm.dev/sharing-namespaces"
	// AnnotationReleaseLoadBalancerIP, set to "true", gives up an IP the Service keeps outside every pool
	// (WarningOutsidePools) or shares across namespaces without the opt-in of both
	// (WarningSharedWithoutOptIn): the Service gets a new IP from a pool that matches it.
	AnnotationReleaseLoadBalancerIP = "talos-ccm.dev/release-load-balancer-ip"
	// AnnotationLoadBalancerPool asks for IPs from the named pools only (comma-separated), which may serve
	// only such requests (autoAssign: false).
	AnnotationLoadBalancerPool = "talos-ccm.dev/load-balancer-pool"
)

// Other load balancers whose IP-request annotations talos-ccm reads when the config file's
// loadBalancer.requestAnnotations names them, for a migration without renumbering.
const (
	// RequestAnnotationsMetalLB reads AnnotationMetalLBIPs.
	RequestAnnotationsMetalLB = "metallb"
	// RequestAnnotationsCilium reads AnnotationCiliumIPs.
	RequestAnnotationsCilium = "cilium"
	// AnnotationMetalLBIPs is MetalLB's IP request, comma-separated.
	AnnotationMetalLBIPs = "metallb.universe.tf/loadBalancerIPs"
	// AnnotationCiliumIPs is Cilium LB-IPAM's IP request, comma-separated.
	AnnotationCiliumIPs = "lbipam.cilium.io/ips"
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
	return class == "" || class == LoadBalancerClass
}

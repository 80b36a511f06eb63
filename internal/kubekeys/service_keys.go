package kubekeys

// LoadBalancerClass is talos-ccm's spec.loadBalancerClass: Services of type LoadBalancer with this class, or
// with none, get their IPs from talos-ccm's pools.
const LoadBalancerClass = "talos-ccm.dev/lb"

// Annotations of Services that talos-ccm reads.
const (
	// ServiceAnnotationPrefix is the namespace of the Service annotations talos-ccm reads.
	ServiceAnnotationPrefix = "talos-ccm.dev/"
	// AnnotationLoadBalancerIPs asks for specific IPs, one per family, separated by commas.
	AnnotationLoadBalancerIPs = ServiceAnnotationPrefix + "load-balancer-ips"
	// AnnotationSharingKey lets Services with the same key share an IP when their ports differ.
	AnnotationSharingKey = ServiceAnnotationPrefix + "sharing-key"
	// AnnotationSharingNamespaces names the other namespaces (comma-separated, or "*" for all) whose
	// Services may share the Service's IP; a share across namespaces needs it on every Service involved.
	AnnotationSharingNamespaces = ServiceAnnotationPrefix + "sharing-namespaces"
	// AnnotationReleaseLoadBalancerIP, set to "true", gives up an IP the Service keeps outside every pool
	// or shares across namespaces without the opt-in of both: the Service gets a new IP from a pool that
	// matches it.
	AnnotationReleaseLoadBalancerIP = ServiceAnnotationPrefix + "release-load-balancer-ip"
	// AnnotationLoadBalancerPool asks for IPs from the named pools only (comma-separated), which may serve
	// only such requests (autoAssign: false).
	AnnotationLoadBalancerPool = ServiceAnnotationPrefix + "load-balancer-pool"

	// AnnotationMetalLBIPs is MetalLB's IP request, comma-separated, read for a migration without
	// renumbering when the config file asks for it.
	AnnotationMetalLBIPs = "metallb.universe.tf/loadBalancerIPs"
	// AnnotationCiliumIPs is Cilium LB-IPAM's IP request, comma-separated, read as AnnotationMetalLBIPs is.
	AnnotationCiliumIPs = "lbipam.cilium.io/ips"
)

// ConditionLoadBalancerIPAllocated is the type of the condition talos-ccm keeps in status.conditions of the
// Services it serves: True when every family of the Service has its IP, False with the reason otherwise. An
// IP the Service keeps although no pool would hand it out now counts as allocated; the reason is then the
// allocation's warning.
const ConditionLoadBalancerIPAllocated = ServiceAnnotationPrefix + "LoadBalancerIPAllocated"

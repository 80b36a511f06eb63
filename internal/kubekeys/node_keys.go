package kubekeys

// Taints of Nodes.
const (
	// TaintUninitialized is the taint a kubelet started with --cloud-provider=external registers its Node
	// with: no cloud provider has initialized the Node yet. talos-ccm removes it once the Node's
	// providerID, labels and addresses are applied.
	TaintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
	// TaintShutdown marks a Node whose machine is shut down.
	TaintShutdown = "node.cloudprovider.kubernetes.io/shutdown"
	// TaintPrefixNodeLifecycle is the namespace of the Kubernetes node lifecycle's taints
	// (node.kubernetes.io/not-ready, unreachable...), which the kubelet and kube-controller-manager set
	// and remove.
	TaintPrefixNodeLifecycle = "node.kubernetes.io/"
)

// Labels of Nodes that talos-ccm sets from the machine's facts and the cluster name.
const (
	LabelRegion       = "topology.kubernetes.io/region"
	LabelZone         = "topology.kubernetes.io/zone"
	LabelInstanceType = "node.kubernetes.io/instance-type"
	LabelPlatform     = "node.cloudprovider.kubernetes.io/platform"
	LabelLifecycle    = "node.cloudprovider.kubernetes.io/lifecycle"
	LabelClusterName  = "node.cloudprovider.kubernetes.io/clustername"

	// The deprecated beta topology labels, which the Kubernetes cloud-node controller still sets next to
	// the GA ones (and so does the Talos CCM): selectors written for them keep working.
	LabelBetaInstanceType = "beta.kubernetes.io/instance-type"
	LabelBetaZone         = "failure-domain.beta.kubernetes.io/zone"
	LabelBetaRegion       = "failure-domain.beta.kubernetes.io/region"
)

// Labels of Nodes that others set and talos-ccm reads.
const (
	// LabelControlPlane marks the Node of a control-plane machine. A kubelet may not set it (the
	// NodeRestriction admission plugin refuses node-role.kubernetes.io labels from a node): Talos's
	// machined applies it with the machine's admin credentials.
	LabelControlPlane = "node-role.kubernetes.io/control-plane"
	// LabelMaster is the control-plane label of older clusters.
	LabelMaster = "node-role.kubernetes.io/master"
	// LabelBetaOS and LabelBetaArch are the deprecated operating system and architecture labels a kubelet
	// still sets on its own Node.
	LabelBetaOS   = "beta.kubernetes.io/os"
	LabelBetaArch = "beta.kubernetes.io/arch"
)

// Annotations of Nodes.
const (
	// AnnotationProvidedNodeIP carries the --node-ip of a kubelet started with --cloud-provider=external,
	// comma-separated. The kubelet writes it: it says where the machine may be, never which machine it is.
	AnnotationProvidedNodeIP = "alpha.kubernetes.io/provided-node-ip"

	// AnnotationPrefixOwn is the namespace of talos-ccm's own bookkeeping annotations on Nodes, which
	// transformation rules may not write.
	AnnotationPrefixOwn = "tccm.dev/"
	// AnnotationOwnedTaints is a copy, on the Node, of the taints talos-ccm owns: comma-separated
	// "key:Effect" entries, sorted. It is for people and tools: the kubelet can write it, so talos-ccm never
	// reads it as the record of what it owns, and an entry talos-ccm never recorded is ignored.
	AnnotationOwnedTaints = AnnotationPrefixOwn + "owned-taints"
	// AnnotationOwnedLabels is a copy, on the Node, of the keys of the labels talos-ccm owns:
	// comma-separated, sorted. Like AnnotationOwnedTaints, it is never read as the evidence.
	AnnotationOwnedLabels = AnnotationPrefixOwn + "owned-labels"
	// AnnotationOwnedAnnotations is a copy of the keys of the annotations talos-ccm owns, as
	// AnnotationOwnedLabels is for labels. It never lists the ownership annotations themselves.
	AnnotationOwnedAnnotations = AnnotationPrefixOwn + "owned-annotations"
)

// Package clusters runs talos-ccm for the many clusters of one host, in the host's own COSI runtime and
// state: the host declares each cluster as a Cluster resource, and one Controller builds, runs, restarts
// and removes the cluster's pipeline (ccm.New), and reports its health as a ClusterStatus.
//
// # Several clusters side by side in one host state
//
// Every talos-ccm resource type lives in one namespace, fixed by its ResourceDefinition ("talos", "kube",
// "node", ...), and the generic controllers read and write there: they cannot be pointed at other
// namespaces. Controller names are fixed too, and unique within a runtime. So the namespaces move below the
// controllers instead, in the state, and each cluster's controllers run in a talos-ccm runtime of their
// own, over a view of the host's state that stores each namespace N as prefix+N ("cluster-a:talos") and
// refuses every other namespace, so that a cluster's pipeline never reaches the host's resources or
// another cluster's. The prefix is the Cluster's namespacePrefix, or its ID followed by
// NamespacePrefixSeparator.
//
// The host feeds each cluster's facts into HostNamespace(prefix, ccm.TalosNamespace) of its own state, as
// outputs of its own controller (the facts adapter, package factsv1, does it), and reads each cluster's
// decisions from the other prefixed namespaces. PrefixedNamespaces lists a prefix's namespaces, with those
// that hold decisions worth persisting, so that the host's namespaced state builder can route them to a
// database and the others to memory (MemoryStateBuilder).
//
// What the view costs and does not do: every resource crossing it is copied once more (to change its
// namespace); two clusters of the same prefix would share resources, so the Controller refuses a prefix
// that another running cluster has; and the host's own controllers see the clusters' resources under their
// prefixed namespaces, as they see any other resource.
package clusters

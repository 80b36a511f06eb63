// Package ccm embeds talos-ccm's pipeline in another program's COSI runtime: a host such as Omni that
// already knows every machine's platform metadata can run talos-ccm for the clusters it manages, without
// deploying anything into them and without Talos API calls.
//
// The pipeline of one cluster is a set of COSI controllers: sources that mirror the cluster's Nodes and
// CSRs and, optionally, read every machine's facts from its Talos API; decisions (NodeTransform,
// CSRDecision, NodeLifecycle, IP allocations); and sinks, the only writers to Kubernetes. Register puts
// them, with talos-ccm's namespaces and resource definitions, into a host's runtime and its state; the
// talos-ccm service itself is assembled the same way.
//
// # Clusters that come and go
//
// A host that creates and destroys clusters all day declares them as Cluster resources in its own state
// and registers one ClustersController into its runtime (RegisterClusterResources, NewClustersController):
// the controller starts a cluster's pipeline when its Cluster appears, starts it again with the new spec
// when the spec changes, and when the Cluster is torn down stops it, destroys the cluster's resources in
// the host's state (unless the spec keeps them) and lets the Cluster go; it writes each cluster's health as
// a ClusterStatus. Credentials come from the host's client provider (ClustersOptions.ClientConfig, or
// Options.ClientConfig for New and Register), asked again on 401 answers and on the host's signal
// (RefreshCredentials): new credentials for the same apiserver switch every connection of the pipeline at
// once. The host feeds facts in its own shape with the facts adapter, package factsv1. The README's
// embedding section states the whole contract.
//
// # Feeding facts
//
// With Options.Talos nil, the Talos source is off and nothing contacts a Talos API: the host writes (with
// factsv1.Sync, or itself) a PlatformMetadata and a MachineAddresses for each Node (its ID is the Node name) into TalosNamespace of
// the cluster's state, with the constructors and types of this package and the specs of
// github.com/talos-ccm/talos-ccm/api/proto/specs. Both must name the Node in their nodename field (the
// host says which machine is which Node, as a Talos machine does in its Nodename resource): facts that
// name no node, or another one, give the Node nothing. A Node is initialized once both exist; destroying them
// puts its NodeTransform back to pending (a Node keeps the providerID it was given: Kubernetes never lets
// it change). MachineStatus is only read by node-lifecycle, for the shutdown taint.
//
// The host writes these facts from a controller of its own runtime: from the cluster runtime's point of
// view, the host is a source, as the Kubernetes API is. No controller of the cluster runtime outputs those
// types while the Talos source is off, so the writes never conflict with one.
//
// # Several clusters side by side in one host runtime and one host state
//
// Every talos-ccm resource type lives in one namespace, fixed by its ResourceDefinition ("talos", "kube",
// "node", ...), and the generic controllers (qtransform) read and write there: they cannot be pointed at
// other namespaces. Controller names are fixed too, and unique within a runtime. So the namespaces move
// below the controllers instead, in the state, and each cluster's controllers run in a talos-ccm runtime of
// their own: with Options.NamespacePrefix (such as "cluster-a:"), that runtime runs over a view of the
// host's state (NewPrefixedState) that stores each namespace N as prefix+N ("cluster-a:talos") and refuses
// every other namespace, so that a cluster's pipeline never reaches the host's resources or another
// cluster's.
//
// A host thus keeps one state and one runtime, its own, with its own controllers. Register with a prefix
// adds one controller to the host's runtime per cluster (PipelineControllerName(prefix)), which the host's
// runtime starts, supervises and stops like any other of its controllers: each of its runs builds the
// cluster's talos-ccm runtime over the cluster's prefixed view of the host's state, with its informers and
// controllers, runs it until the host's runtime stops, and stops it; when the pipeline fails (a watch of
// the host's state that fell behind, for one), the host's runtime restarts it with its backoff. That
// controller declares no inputs and no outputs: the pipeline's controllers declare theirs to the talos-ccm
// runtime, and write straight to the host's state, through the view, under their own names as owners,
// never as the host runtime's.
//
// The host's fact controller writes each cluster's PlatformMetadata and MachineAddresses into
// HostNamespace(prefix, TalosNamespace) of its own state, as outputs of its own runtime
// (NewPlatformMetadataIn, NewMachineAddressesIn), and it can read each cluster's decisions through the
// State of the CCM that Register returned (the prefixed view). PrefixedNamespaces lists a prefix's
// namespaces, with those that hold decisions worth persisting, so that the host's namespaced state builder
// can route them to a database and the others to memory (MemoryStateBuilder). Pipelines of different
// prefixes share nothing but the host's state, the host's runtime and the process.
//
// What the view costs and does not do: every resource crossing it is copied once more (to change its
// namespace); two pipelines given the same prefix would share one pipeline's resources, so a host gives
// each cluster its own (the host's runtime refuses the same prefix twice); and the host's own controllers
// see the clusters' resources under their prefixed namespaces, through its state, as they see any other
// resource.
//
// New with a prefix builds the same pipeline as an Instance that the host runs itself (Instance.Run),
// instead of a controller of the host's runtime. Without a prefix, Register puts the pipeline's controllers
// into the host's runtime itself (that is how the talos-ccm service assembles itself): it suits a host that
// manages a single cluster, as long as its own controllers' names and output types do not collide with
// talos-ccm's; and New gives a cluster a runtime and a state of its own.
package ccm

// Package ccm embeds talos-ccm's pipeline in another program's COSI runtime: a host such as Omni that
// already knows every machine's platform metadata can run talos-ccm for the clusters it manages, without
// deploying anything into them and without Talos API calls.
//
// The pipeline of one cluster is a set of COSI controllers: sources that mirror the cluster's Nodes and
// CSRs and, optionally, read every machine's facts from its Talos API; decisions (NodeTransform,
// CSRDecision, NodeLifecycle, IP allocations); and sinks, the only writers to Kubernetes. Register puts
// them, with talos-ccm's namespaces and resource definitions, into a runtime and its state; the talos-ccm
// service itself is assembled the same way.
//
// # Feeding facts
//
// With Options.Talos nil, the Talos source is off and nothing contacts a Talos API: the host writes a
// PlatformMetadata and a MachineAddresses for each Node (its ID is the Node name) into TalosNamespace of
// the cluster's state, with the constructors and types of this package and the specs of
// github.com/talos-ccm/talos-ccm/api/proto/specs. A Node is initialized once both exist; destroying them
// puts its NodeTransform back to pending (a Node keeps the providerID it was given: Kubernetes never lets
// it change). MachineStatus is only read by node-lifecycle, for the shutdown taint.
//
// The host writes these facts with the state's own API (for example safe.StateModify and Destroy), from a
// controller of its own runtime: from the cluster runtime's point of view, the host is a source, as the
// Kubernetes API is. No controller of the cluster runtime outputs those types while the Talos source is
// off, so the writes never conflict with one.
//
// # Several clusters
//
// Every talos-ccm resource type lives in one namespace, fixed by its ResourceDefinition ("talos", "kube",
// "node", ...), and the generic controllers read and write there; controller names are fixed too, and
// unique within a runtime. A namespace prefix per cluster in one shared runtime would mean rewriting
// every controller, so the supported way is one runtime and one state per cluster: New creates both
// (NewState is an in-memory state) and returns an Instance whose Run runs the cluster's runtime. A host
// keeps one Instance per cluster next to its own runtime and state, and its fact controller writes into
// each Instance's State. Two clusters never see each other's resources, because they share nothing but
// the process.
//
// A host that manages a single cluster may instead call Register on its own runtime and state, as long
// as its own controllers' names and output types do not collide with talos-ccm's.
package ccm

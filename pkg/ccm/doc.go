// Package ccm embeds talos-ccm's pipeline in another program: a host such as Omni that already knows every
// machine's platform metadata can run talos-ccm for the clusters it manages, without deploying anything
// into them and without Talos API calls.
//
// The pipeline of one cluster is a set of COSI controllers: sources that mirror the cluster's Nodes and
// CSRs and, optionally, read every machine's facts from its Talos API; decisions (NodeTransform,
// CSRDecision, NodeLifecycle, IP allocations); and sinks, the only writers to Kubernetes.
//
// # Two ways to embed
//
// A program that runs one cluster calls New: it builds the pipeline in a COSI runtime of its own, over a
// state of its own (or one the program gives), and Run runs it; the program may add its own controllers to
// the runtime (Runtime) and reads the decisions from the state (State). The talos-ccm service assembles
// itself this way.
//
// A host that creates and destroys clusters all day declares them as Cluster resources in its own state and
// registers one clusters.Controller into its own runtime (package clusters): it builds each cluster's
// pipeline with New over the cluster's share of the host's state (every talos-ccm namespace N stored as
// prefix+N, such as "cluster-a:talos"), starts it when its Cluster appears, starts it again when the spec
// changes or the pipeline fails, and when the Cluster is torn down stops it and destroys the cluster's
// resources; it writes each cluster's health as a ClusterStatus. The README's embedding section states the
// whole contract.
//
// Every default (timeouts, concurrency, the configuration) is in DefaultOptions: a zero field of Options
// stands for its value there, and talos-ccm's flags start from it.
//
// # Credentials
//
// Credentials come from the host's client provider (Options.ClientConfig, or clusters.Options.ClientConfig),
// asked again on 401 answers and on the host's signal (RefreshCredentials): new credentials for the same
// apiserver switch every connection of the pipeline at once.
//
// # Feeding facts
//
// With Options.Talos nil, the Talos source is off and nothing contacts a Talos API: the host writes (with
// the facts adapter, package factsv1, or itself) a PlatformMetadata and a MachineAddresses for each Node
// (its ID is the Node name) into TalosNamespace of the cluster's state, with the constructors and types of
// this package and the specs of github.com/talos-ccm/talos-ccm/api/proto/specs. Both must name the Node in
// their nodename field (the host says which machine is which Node, as a Talos machine does in its Nodename
// resource): facts that name no node, or another one, give the Node nothing. A Node is initialized once
// both exist; destroying them puts its NodeTransform back to pending (a Node keeps the providerID it was
// given: Kubernetes never lets it change). MachineStatus is only read by node-lifecycle, for the shutdown
// taint.
//
// The host writes these facts from a controller of its own runtime: from the pipeline's point of view, the
// host is a source, as the Kubernetes API is. No controller of the pipeline outputs those types while the
// Talos source is off, so the writes never conflict with one.
package ccm

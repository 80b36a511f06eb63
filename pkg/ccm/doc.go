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
//
// # Compatibility
//
// talos-ccm is at v0: this is what a host that embeds it may count on, and what a release may change. It
// covers the embedding API: the exported names of this package and of packages clusters and factsv1, with
// their signatures, fields and documented meaning; the resource types and namespaces they name; the specs
// of those resources (api/proto/specs); factsv1's YAML and JSON schema; and the names stored as finalizers
// and owners. Nothing else is promised here: internal packages, log lines, error texts (test an error with
// errors.Is or errors.As, on the types exported here), metric names, or the flags of the talos-ccm command.
//
//   - A patch release (v0.X.Y to v0.X.Y+1) does not change the embedding API.
//   - A minor release (v0.X to v0.X+1) removes or changes incompatibly only what an earlier minor release
//     marked "Deprecated:" in its doc comment, naming what replaces it: a deprecated name works for at
//     least one whole minor series.
//   - A minor release may add: functions, methods, types, constants, fields of option structs (their zero
//     value keeps the behaviour they had before: write struct literals with field names), and optional
//     parameters at the end of a signature (variadic options: a call still compiles, a function value of
//     the old type does not, which the change log says). A default in DefaultOptions may change in a minor
//     release, said in the change log and the README.
//   - Resource types and namespaces (ClusterType, PlatformMetadataType, TalosNamespace...) and controller
//     names (clusters.ControllerName) are stored in the host's state, in owners and in finalizers, and
//     never change. A spec is a protobuf message: fields are added with new numbers; a field keeps its
//     number, type, JSON name and meaning, and a removed field's number and name are reserved. A
//     resource whose spec must change in another way becomes a new type, next to the old one for at least
//     one minor release.
//   - factsv1 keeps its shape, its YAML and JSON names and their meaning for as long as it exists; a new
//     optional field may be added, and leaving it out keeps the behaviour it had before. A version of the
//     facts that cannot say the same is a new package (factsv2) next to factsv1, which stays for at least
//     one minor release after it.
//   - The types of the modules the API is made of (COSI's state.State and controller.Runtime, client-go's
//     rest.Config, zap's Logger) follow those modules: a minor release may move to a newer version of
//     them, said in the change log.
//
// Every change of the embedding API has an entry in API_CHANGES.md (next to this file), newest first: what
// changed, whether it is compatible, and what replaces what is deprecated. TestExportedAPI keeps it so: it
// renders the exported declarations of the three packages into testdata/api.txt and fails when they
// differ, and when the newest entry of API_CHANGES.md does not name the rendering's hash. After an intended
// change, run
//
//	go test ./pkg/ccm -run TestExportedAPI -update
//
// and write the entry with the line the test then asks for ("API sha256: ..."). The test sees the
// declarations, not what the resources' specs or the documented behaviour say: a change of those needs its
// entry too.
//
// The examples (Example functions of this package, clusters and factsv1) run with go test: they use an
// in-memory state and an apiserver address that nothing answers, so they run everywhere.
package ccm

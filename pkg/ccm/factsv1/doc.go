// Package factsv1 is version 1 of the facts a host that embeds talos-ccm (pkg/ccm, with its Talos source
// off) feeds for each machine, instead of writing talos-ccm's PlatformMetadata and MachineAddresses in
// Talos's exact shape itself.
//
// # A stable contract
//
// Machine, Address and Exposure keep their shape and meaning, their YAML and JSON names included, for as
// long as this package exists: a host can keep machines in files and upgrade talos-ccm without touching
// them. A later version of the facts is a new package (factsv2) next to this one; talos-ccm's internal
// resources may change under both, as the conversions here follow them.
//
// # Feeding facts
//
// A host lists the machines of a cluster and calls Sync from a controller of its own runtime that declares
// Outputs as its outputs; ns is the cluster's talos namespace in the host's state (the cluster's namespace
// prefix followed by "talos"). Sync writes the facts of every valid machine under its Node name, destroys
// those of machines no longer listed, and says which machines it refused: their facts stay as they were.
// Machine.Validate says the same before a host stores a machine; PlatformMetadataSpec,
// MachineAddressesSpec and MachineStatusSpec convert one machine for a host that writes the resources
// itself. The host's options (ExposureFromIP, DeleteRemovedNodes) are given to Sync and the conversions
// alike.
//
// # Lifecycle
//
// A host knows when a machine shuts down, when it no longer reaches it, and when it removes it from the
// cluster: Machine.Stage, Connected and Removed say it, and node-lifecycle reads them as it reads a Talos
// machine's own stage and whether it answers:
//
//   - StageShuttingDown: the Node gets the taint node.cloudprovider.kubernetes.io/shutdown while it is
//     NotReady, whether the host still reaches the machine or not; another stage removes it.
//   - Connected false: nothing is done. Losing the connection is no evidence of anything.
//   - Removed: the Node is deleted once NotReady for the stale-node grace (the Cluster's
//     nodeLifecycle.staleNodeGrace, or ccm.Options.NodeLifecycle.StaleNodeGrace; 5 minutes by default),
//     only when the host passes DeleteRemovedNodes; never while it is Ready. Without the option, the
//     NodeLifecycle only says that the Node would be deleted.
//   - None of them: node-lifecycle has no facts about the machine and does nothing to its Node.
//
// Removed Nodes: a host that already deletes the Nodes of the machines it removes, as Omni's node audit
// does, leaves DeleteRemovedNodes out; one that does not passes it. With both on, both delete the same
// Nodes (talos-ccm's deletion is guarded by the Node's UID, and a Node already gone is no error): no harm,
// but the work is done twice. Either way, keep listing a removed machine until its Node is gone: the
// lifecycle of a machine no longer listed goes with its other facts.
//
// # What talos-ccm can and cannot decide without link names
//
// Talos names the link of every address, and talos-ccm chooses a Node's ExternalIPs by it. Hosts rarely
// know link names, and Address.Exposure stands in for them:
//
//   - InternalIPs: always. They are the kubelet's claims (its provided node IPs, else the Node's own
//     InternalIPs) checked against the machine's addresses, else the first of NodeIPs; links play no part.
//   - ExternalIPs on metal, nocloud, openstack and oracle (and an empty platform, taken as metal): the
//     global non-private addresses, with or without link names. Without them a public address on a
//     virtual link (KubeSpan, SideroLink, Cilium) cannot be told from a real one: mark it private.
//   - ExternalIPs on every other platform (aws, gcp, azure, hcloud...): only the addresses marked public,
//     or on a link named "external" (Talos's shape). Unmarked addresses without a link name are never
//     chosen, unless the host passes ExposureFromIP, which marks them public or private by their IP (global
//     unicast and neither private nor shared is public, as talos-ccm decides on metal), or a transformation
//     rule turns publicIPDiscovery on, which takes the global non-private ones as on metal.
//   - Marked private always wins: such an address is never an ExternalIP, whatever its link, the platform
//     or publicIPDiscovery.
//   - A marked public address is taken even when its IP is private (the host knows better), but never
//     when it is one of the Node's InternalIPs; at most one ExternalIP per family is chosen, the first by
//     link and address.
package factsv1

// Package talossim simulates a fleet of Talos Linux machines behind one apid-like endpoint, for the
// demo, the end-to-end tests and the benchmarks of talos-ccm.
//
// # Talos API
//
// A Server serves the COSI State service (the one the machinery client's COSI field speaks) over
// TLS on TCP, with a generated CA, server and client certificates and a talosconfig, and in plain
// text on a unix socket. Every request is routed, as apid does, by its `node` metadata
// (client.WithNode) to one machine, addressed by its name, hostname FQDN or any of its node IPs.
// Each machine serves, in its own in-memory state built on its first request:
//
//   - runtime PlatformMetadatas.talos.dev "platformmetadata" (absent with NoPlatformMetadata);
//   - network AddressStatuses.net.talos.dev "<link>/<prefix>", one per address;
//   - network HostnameStatuses.net.talos.dev "hostname";
//   - hardware SystemInformations.hardware.talos.dev "systeminformation" (absent without a UUID);
//   - runtime MachineStatuses.runtime.talos.dev "machine" (stage, ready when running);
//   - k8s Nodenames.kubernetes.talos.dev "nodename": the node name the machine says it is, its Name
//     unless Nodename claims another one (absent with NoNodename);
//   - on control-plane machines, controlplane ControllerManagerConfigs.kubernetes.talos.dev
//     "kube-controller-manager" with the pod and service CIDRs.
//
// Refusals: the `nodes` metadata (client.WithNodes) and a request without `node` get
// InvalidArgument; an unknown node NotFound (the COSI client reports it as a not-found error whose
// message says "unknown node"); an unreachable or removed machine Unavailable (open streams end
// with it too); every write (Create, Update, Destroy, Teardown...) PermissionDenied.
//
// # Fault knobs
//
// Fleet changes take effect at once, and watches see them: SetLatency, SetUnreachable,
// RemoveResource/RestoreResource (kinds platformmetadata, systeminformation, addresses,
// machinestatus, hostname, controllermanagerconfig, nodename), SetAddresses, SetStage, UpdateMachine,
// AddMachine, RemoveMachine; Machines, Machine and Faults read them. Server.Pause and Server.Resume take
// the whole endpoint down (every connection and stream cut, new ones refused) and back up on the same
// addresses, as an apid restart or a network outage would. SetRawResources serves resources verbatim in
// place of those built from a machine's facts, for data Machine.Validate refuses (an empty platform, an
// address without a prefix).
//
// # Control API
//
// NewControlHandler serves the same knobs as HTTP/JSON (cmd/talos-sim --control-listen). Machines
// are JSON objects with the fields of the fleet file; answers that return a machine return
// {"machine": {...}, "faults": {"latency": "250ms", "unreachable": false, "removed": [...]}};
// errors are {"error": "..."} with 400, 404 (unknown machine) or 409 (add conflict).
//
//	GET    /machines                           every machine with its faults
//	GET    /machines/{name}                    one machine
//	POST   /machines                           add a machine (body: machine)
//	DELETE /machines/{name}                    remove a machine (204)
//	PUT    /machines/{name}/latency            {"latency": "250ms"} ("0s" removes it)
//	PUT    /machines/{name}/unreachable        {"unreachable": true}
//	PUT    /machines/{name}/addresses          [{"linkName": "eth0", "prefix": "10.0.0.5/24", "scope": "global"}]
//	PUT    /machines/{name}/stage              {"stage": "shutting down"}
//	DELETE /machines/{name}/resources/{kind}   remove the resources of a kind
//	PUT    /machines/{name}/resources/{kind}   restore them
//	GET    /kubelets/times                     per node: created, ready, initialized, csrSubmitted, csrName, csrs, csrSettled
//	PUT    /kubelets/{name}/ready              {"ready": false} flips the Node's Ready condition (204)
//
// # Kubelets
//
// Kubelets registers a Node per machine as a kubelet with --cloud-provider=external and --node-ip does
// (the uninitialized taint, the provided-node-ip annotation, a Ready status, the node IPs and the Node
// name as its first addresses), and asks for a serving certificate as a kubelet's certificate manager
// does, with the SANs a kubelet takes from the Node's addresses: at once, and again once that request is
// approved if the CCM gave the Node names or IPs it lacks. Every write of a kubelet is made impersonating
// system:node:NAME in system:nodes, so an apiserver with the Node authorizer and NodeRestriction
// holds it to what a real kubelet may do; the control-plane role label, which a kubelet may not set,
// is applied as the admin, as Talos's machined applies it.
//
// # Fleet file
//
// A YAML document with a `machines:` list; see Machine for the fields (lowerCamel names, decoded
// strictly). Generate makes a deterministic, varied fleet for a seed.
package talossim

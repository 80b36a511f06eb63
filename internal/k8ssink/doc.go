// Package k8ssink is the only code in talos-ccm that writes to Kubernetes.
//
// A sink applies decisions computed elsewhere (by the decision controllers of the pipeline) and
// never decides anything by itself: it does not compute a label, pick a providerID or choose when a
// Node is initialized. What it owns is how a decision reaches the API server without clobbering
// the fields of kubelet, operators and other controllers, and without writing when nothing changed:
//
//   - status.addresses go through the status subresource as a JSON merge patch, which replaces the
//     list (a strategic merge patch would merge addresses by type);
//   - labels, annotations, providerID and taints (an atomic list shared with kubelet and operators) go
//     in one read-modify-write update guarded by the Node's resourceVersion and retried on conflict; the
//     keys talos-ccm owns are recorded in its own state (OwnedKeys, a NodeOwnership), so a key dropped
//     from the desired set is removed while keys set by others survive, and the copy on the Node, which
//     the kubelet can write, is never read as the record;
//   - providerID is only ever set on a Node that has none.
//
// Each write is derived by pure planning functions from the object as last seen (typically from an
// informer cache), so a resync with nothing to change issues no request at all.
//
// Every sink is a SinkController built by one generic constructor: a sink supplies its name, its input,
// the kind of its ApplyStatuses, its other inputs and the function that applies one input and says how the
// pass ended (applied, skipped, failed, ...); the outcome is recorded in the input's ApplyStatus the same
// way for every sink, and a failed write is retried after a backoff that grows with the failures in a row.
// An object gets an ApplyStatus once a pass has something to say about it (a write, an error, a failure, an
// initialized Node): a pass that finds nothing to do creates none.
// The passes run from a keyed queue of the sink's own (internal/keyed), which costs the same whether ten or
// ten thousand objects wait for the apiserver.
package k8ssink

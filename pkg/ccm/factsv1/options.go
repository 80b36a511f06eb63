package factsv1

// Option is a choice of the host about what talos-ccm may conclude from its facts, given to Sync and to
// the conversions. Without options, talos-ccm concludes nothing that the facts do not say.
type Option func(*options)

type options struct {
	exposureFromIP     bool
	deleteRemovedNodes bool
}

func newOptions(opts []Option) options {
	var o options

	for _, opt := range opts {
		opt(&o)
	}

	return o
}

// ExposureFromIP has talos-ccm decide the exposure of every address that has neither a link name nor an
// exposure from the IP itself, as it does with Talos's addresses on metal: public when the IP is global
// unicast and neither private (RFC 1918, RFC 4193) nor shared (100.64.0.0/10), private otherwise. It is for
// a host that knows no more of its addresses than the IPs, so that Nodes on every platform (aws, gcp,
// azure...) get an ExternalIP; a public address on a virtual link (KubeSpan, SideroLink) is then taken as
// public too, so give it a link name or mark it private.
func ExposureFromIP() Option {
	return func(o *options) { o.exposureFromIP = true }
}

// DeleteRemovedNodes has talos-ccm delete the Node of a machine the host marks Removed, once the Node has
// been NotReady for the stale-node grace (a Ready Node is never deleted), through its node-lifecycle
// verdict. A host that deletes those Nodes itself (Omni's node audit does) leaves it out: then the verdict
// only says that the Node would be deleted.
func DeleteRemovedNodes() Option {
	return func(o *options) { o.deleteRemovedNodes = true }
}

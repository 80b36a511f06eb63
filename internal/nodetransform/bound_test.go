package nodetransform_test

import (
	"net/netip"

	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/internal/nodetransform"
)

// bound returns in with facts that name themselves its node, as the Talos source files them only for the
// machine that says it is the Node: the tests of what is built from facts start from bound facts.
func bound(in nodetransform.Input) nodetransform.Input {
	if in.Platform != nil {
		in.Platform = proto.CloneOf(in.Platform)
		in.Platform.Nodename = in.NodeName
	}

	if in.Addresses != nil {
		in.Addresses = proto.CloneOf(in.Addresses)
		in.Addresses.Nodename = in.NodeName
	}

	// The Talos source asks the machine through the Node's first provided IP.
	if in.Addresses != nil && in.Addresses.GetNodeIp() == "" {
		for _, ip := range in.Node.GetProvidedNodeIps() {
			if addr, err := netip.ParseAddr(ip); err == nil && !addr.IsUnspecified() {
				in.Addresses.NodeIp = ip

				break
			}
		}
	}

	return in
}

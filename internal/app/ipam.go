package app

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// applyIPAMFlags checks the IP allocation flags before anything starts, and applies
// --allocate-node-cidrs: it turns the node-ipam controller on as if it were listed in --controllers (which
// turns it on too), and contradicts an explicit -node-ipam.
func applyIPAMFlags(opts Options, enabled map[string]bool) error {
	if _, err := parseCIDRs(opts.ServiceClusterIPRanges, "--service-cluster-ip-range"); err != nil {
		return err
	}

	if opts.AllocateNodeCIDRs {
		if slices.ContainsFunc(opts.Controllers, func(c string) bool { return strings.TrimSpace(c) == "-"+ControllerNodeIPAM }) {
			return fmt.Errorf("--allocate-node-cidrs contradicts --controllers=-%s", ControllerNodeIPAM)
		}

		enabled[ControllerNodeIPAM] = true
	}

	if !enabled[ControllerNodeIPAM] {
		return nil
	}

	_, err := opts.nodeCIDROptions()

	return err
}

// nodeIPAMNeedsTalos reports whether pod CIDR allocation reads the Talos API: for the machines' IPv6
// prefixes, or for the cluster ranges when --cluster-cidr is not given.
func nodeIPAMNeedsTalos(opts Options, enabled map[string]bool) bool {
	return enabled[ControllerNodeIPAM] && (opts.NodeIPAMMode == ipam.ModeTalosIPv6 || len(opts.ClusterCIDRs) == 0)
}

// nodeCIDROptions converts and checks the pod CIDR flags.
func (o Options) nodeCIDROptions() (ccm.NodeIPAMOptions, error) {
	cidrs, err := parseCIDRs(o.ClusterCIDRs, "--cluster-cidr")
	if err != nil {
		return ccm.NodeIPAMOptions{}, err
	}

	out := ccm.NodeIPAMOptions{
		Mode:         o.NodeIPAMMode,
		ClusterCIDRs: cidrs,
		MaskIPv4:     o.NodeCIDRMaskSizeIPv4,
		MaskIPv6:     o.NodeCIDRMaskSizeIPv6,
	}

	if err = out.Validate(); err != nil {
		return out, fmt.Errorf("invalid pod CIDR flags: %w", err)
	}

	return out, nil
}

// parseCIDRs parses CIDR flag values (each may hold several, separated by commas).
func parseCIDRs(values []string, flag string) ([]netip.Prefix, error) {
	var out []netip.Prefix

	for _, v := range values {
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s == "" {
				continue
			}

			p, err := netip.ParsePrefix(s)
			if err != nil {
				return nil, fmt.Errorf("invalid %s %q: %w", flag, s, err)
			}

			out = append(out, p.Masked())
		}
	}

	return out, nil
}

package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// NodeCIDROptions configure the pod CIDR allocator (the --node-ipam-mode, --cluster-cidr and
// --node-cidr-mask-size-* flags).
type NodeCIDROptions struct {
	// Mode is ModeRange (the default when empty) or ModeTalosIPv6.
	Mode string
	// ClusterCIDRs are the cluster ranges, at most one per family; empty means the ranges a control-plane
	// machine reports in its ControllerManagerConfig.
	ClusterCIDRs []netip.Prefix
	// MaskIPv4 and MaskIPv6 are the pod CIDR sizes; zero means DefaultMaskIPv4, and DefaultMaskIPv6 or
	// DefaultMaskIPv6TalosMode.
	MaskIPv4, MaskIPv6 int
}

// WithDefaults fills the zero fields.
func (o NodeCIDROptions) WithDefaults() NodeCIDROptions {
	if o.Mode == "" {
		o.Mode = ipam.ModeRange
	}

	if o.MaskIPv4 == 0 {
		o.MaskIPv4 = ipam.DefaultMaskIPv4
	}

	if o.MaskIPv6 == 0 {
		o.MaskIPv6 = ipam.DefaultMaskIPv6

		if o.Mode == ipam.ModeTalosIPv6 {
			o.MaskIPv6 = ipam.DefaultMaskIPv6TalosMode
		}
	}

	return o
}

// Validate checks the options as flags are checked: before anything runs.
func (o NodeCIDROptions) Validate() error {
	o = o.WithDefaults()

	if o.Mode != ipam.ModeRange && o.Mode != ipam.ModeTalosIPv6 {
		return fmt.Errorf("unknown node IPAM mode %q (valid: %s, %s)", o.Mode, ipam.ModeRange, ipam.ModeTalosIPv6)
	}

	if len(o.ClusterCIDRs) > 2 {
		return fmt.Errorf("at most two cluster CIDRs (one per family) are allowed, got %d", len(o.ClusterCIDRs))
	}

	if len(o.ClusterCIDRs) == 2 && o.ClusterCIDRs[0].Addr().Is4() == o.ClusterCIDRs[1].Addr().Is4() {
		return errors.New("two cluster CIDRs must be of different families (one IPv4, one IPv6)")
	}

	if o.MaskIPv4 < 1 || o.MaskIPv4 > 32 {
		return fmt.Errorf("the IPv4 node CIDR mask size must be between 1 and 32, got %d", o.MaskIPv4)
	}

	if o.MaskIPv6 < 1 || o.MaskIPv6 > 128 {
		return fmt.Errorf("the IPv6 node CIDR mask size must be between 1 and 128, got %d", o.MaskIPv6)
	}

	for _, c := range o.ClusterCIDRs {
		mask := o.MaskIPv4
		if c.Addr().Is6() {
			mask = o.MaskIPv6

			if o.Mode == ipam.ModeTalosIPv6 {
				continue // IPv6 pod CIDRs come from the machines' prefixes
			}
		}

		if mask < c.Bits() {
			return fmt.Errorf("the node CIDR mask size /%d is larger than the cluster CIDR %s", mask, c)
		}
	}

	return nil
}

// NodeCIDRAllocatorController is the only writer of pod CIDR allocations: from every Node (its
// spec.podCIDRs and, in talos-ipv6 mode, its machine's addresses), the cluster ranges and the Service
// ranges, it keeps one IPAllocation per Node and family and one IPPool per range, with PlanNodeCIDRs. It
// decides nothing until the Node mirror is complete (KubeSync "nodes"), so that a Node not mirrored yet is
// never mistaken for a deleted one; after that, the allocations of Nodes that are gone are released.
type NodeCIDRAllocatorController struct {
	// Options are the allocator's flags; their zero fields mean the defaults.
	Options NodeCIDROptions
}

// Name implements controller.Controller interface.
func (ctrl *NodeCIDRAllocatorController) Name() string {
	return "ipam.NodeCIDRAllocatorController"
}

// Inputs implements controller.Controller interface. Machine addresses are read in talos-ipv6 mode only,
// and the Talos ranges only without cluster CIDRs, so that their changes cost no plan otherwise.
func (ctrl *NodeCIDRAllocatorController) Inputs() []controller.Input {
	inputs := allocatorInputs(kube.KubeNodeType, kube.NodesSyncID)

	if ctrl.Options.WithDefaults().Mode == ipam.ModeTalosIPv6 {
		inputs = append(inputs, controller.Input{Namespace: talos.NamespaceName, Type: talos.MachineAddressesType, Kind: controller.InputWeak})
	}

	if len(ctrl.Options.ClusterCIDRs) == 0 {
		inputs = append(inputs, controller.Input{Namespace: talos.NamespaceName, Type: talos.ControllerManagerConfigType, Kind: controller.InputWeak})
	}

	return inputs
}

// Outputs implements controller.Controller interface.
func (ctrl *NodeCIDRAllocatorController) Outputs() []controller.Output {
	return allocatorOutputs()
}

// Run implements controller.Controller interface.
func (ctrl *NodeCIDRAllocatorController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	opts := ctrl.Options.WithDefaults()

	return runAllocator(ctx, r, logger, allocator[NodeCIDRInput]{
		owner:    ctrl.Name(),
		idPrefix: "node/",
		objects:  "Node",
		syncID:   kube.NodesSyncID,
		waiting:  "pod cidr allocation waiting",
		gather: func(ctx context.Context, r controller.Reader, cfg *config.Config) (NodeCIDRInput, string, error) {
			return ctrl.gather(ctx, r, opts, cfg)
		},
		plan: func(in NodeCIDRInput, held *owned) (map[string]*specs.IPAllocationSpec, map[string]*specs.IPPoolSpec) {
			in.Previous, in.PreviousPools = held.allocations, held.pools
			plan := PlanNodeCIDRs(in)

			return plan.Allocations, plan.Pools
		},
	})
}

// gather reads the inputs of a plan besides the config; why says what is missing when nothing can be
// decided yet.
func (ctrl *NodeCIDRAllocatorController) gather(
	ctx context.Context, r controller.Reader, opts NodeCIDROptions, cfg *config.Config,
) (NodeCIDRInput, string, error) {
	in := NodeCIDRInput{Now: time.Now()}

	var (
		talosPods, talosServices []netip.Prefix
		talosSource              string
	)

	if len(opts.ClusterCIDRs) == 0 {
		cmcs, err := safe.ReaderListAll[*talos.ControllerManagerConfig](ctx, r)
		if err != nil {
			return in, "", fmt.Errorf("failed to list controller manager configs: %w", err)
		}

		talosPods, talosServices, talosSource = talosRanges(cmcs)
	}

	in.Settings = NodeCIDRSettings{
		Mode:          opts.Mode,
		ClusterCIDRs:  opts.ClusterCIDRs,
		ClusterSource: "flags",
		MaskIPv4:      opts.MaskIPv4,
		MaskIPv6:      opts.MaskIPv6,
		ServiceCIDRs:  parsePrefixes(cfg.TypedSpec().Value.GetServiceCidrs()),
	}

	if len(in.Settings.ClusterCIDRs) == 0 {
		if len(talosPods) == 0 {
			return in, "waiting for the cluster ranges: no --cluster-cidr, and no control-plane machine has reported its ControllerManagerConfig yet", nil
		}

		in.Settings.ClusterCIDRs, in.Settings.ClusterSource = talosPods, talosSource
	}

	if len(in.Settings.ServiceCIDRs) == 0 {
		in.Settings.ServiceCIDRs = talosServices
	}

	nodes, err := safe.ReaderListAll[*kube.KubeNode](ctx, r)
	if err != nil {
		return in, "", fmt.Errorf("failed to list nodes: %w", err)
	}

	addresses := map[string]*specs.MachineAddressesSpec{}

	if opts.Mode == ipam.ModeTalosIPv6 {
		list, err := safe.ReaderListAll[*talos.MachineAddresses](ctx, r)
		if err != nil {
			return in, "", fmt.Errorf("failed to list machine addresses: %w", err)
		}

		for res := range list.All() {
			addresses[res.Metadata().ID()] = res.TypedSpec().Value
		}
	}

	preferIPv6 := cfg.TypedSpec().Value.GetPreferIpv6()

	for n := range nodes.All() {
		if n.Metadata().Phase() != resource.PhaseRunning {
			continue // deleted: its allocations are released
		}

		spec := n.TypedSpec().Value
		ips, _ := nodeaddress.NodeIPs(spec, "", preferIPv6)
		facts := NodeFacts{
			Name:     n.Metadata().ID(),
			UID:      spec.GetUid(),
			Created:  spec.GetCreated().AsTime(),
			PodCIDRs: spec.GetPodCidrs(),
			NodeIPs:  ips,
		}

		if ma, ok := addresses[facts.Name]; ok {
			facts.Addresses, facts.AddressesKnown = ma.GetAddresses(), true
		}

		in.Nodes = append(in.Nodes, facts)
	}

	return in, "", nil
}

// talosRanges picks the cluster and Service ranges of the first control-plane machine (by Node name) that
// reports pod CIDRs, at most one per family.
func talosRanges(list safe.List[*talos.ControllerManagerConfig]) (pods, services []netip.Prefix, source string) {
	items := slices.Collect(list.All())
	slices.SortFunc(items, func(a, b *talos.ControllerManagerConfig) int {
		return strings.Compare(a.Metadata().ID(), b.Metadata().ID())
	})

	for _, res := range items {
		pods = onePerFamily(parsePrefixes(res.TypedSpec().Value.GetPodCidrs()))
		if len(pods) == 0 {
			continue
		}

		return pods, parsePrefixes(res.TypedSpec().Value.GetServiceCidrs()), "ControllerManagerConfig of control-plane machine " + res.Metadata().ID()
	}

	return nil, nil, ""
}

func parsePrefixes(values []string) []netip.Prefix {
	var out []netip.Prefix

	for _, v := range values {
		if p, err := netip.ParsePrefix(strings.TrimSpace(v)); err == nil {
			out = append(out, p.Masked())
		}
	}

	return out
}

func onePerFamily(prefixes []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix

	for _, p := range prefixes {
		if !slices.ContainsFunc(out, func(q netip.Prefix) bool { return q.Addr().Is4() == p.Addr().Is4() }) {
			out = append(out, p)
		}
	}

	return out
}

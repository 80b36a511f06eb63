package app

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	ipamctrl "github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	kubectrl "github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	talosctrl "github.com/talos-ccm/talos-ccm/internal/controllers/talos"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
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
	return enabled[ControllerNodeIPAM] && (opts.NodeIPAMMode == ipamctrl.ModeTalosIPv6 || len(opts.ClusterCIDRs) == 0)
}

// nodeCIDROptions converts and checks the pod CIDR flags.
func (o Options) nodeCIDROptions() (ipamctrl.NodeCIDROptions, error) {
	cidrs, err := parseCIDRs(o.ClusterCIDRs, "--cluster-cidr")
	if err != nil {
		return ipamctrl.NodeCIDROptions{}, err
	}

	out := ipamctrl.NodeCIDROptions{
		Mode:         o.NodeIPAMMode,
		ClusterCIDRs: cidrs,
		MaskIPv4:     o.NodeCIDRMaskSizeIPv4,
		MaskIPv6:     o.NodeCIDRMaskSizeIPv6,
	}

	if err = out.Validate(); err != nil {
		return out, fmt.Errorf("invalid pod CIDR flags: %w", err)
	}

	return out.WithDefaults(), nil
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

// registerNodeIPAM registers pod CIDR allocation: the source of the cluster ranges from Talos when
// --cluster-cidr is not given, the allocator, and the sink that writes spec.podCIDRs.
func (p *pipeline) registerNodeIPAM() error {
	opts, err := p.opts.nodeCIDROptions()
	if err != nil {
		return err
	}

	if nodeIPAMNeedsTalos(p.opts, map[string]bool{ControllerNodeIPAM: true}) && p.talos == nil {
		return errors.New("node-ipam needs the Talos API (a talosconfig) for talos-ipv6 mode or without --cluster-cidr")
	}

	if len(opts.ClusterCIDRs) == 0 {
		if err = p.runtime.RegisterController(&talosctrl.ControllerManagerConfigSourceController{
			COSI:    p.talos.COSI,
			Options: talosctrl.ControllerManagerConfigSourceOptions{CallTimeout: p.opts.TalosTimeout},
		}); err != nil {
			return err
		}
	}

	return errors.Join(
		p.runtime.RegisterController(&ipamctrl.NodeCIDRAllocatorController{Options: opts}),
		p.runtime.RegisterQController(k8ssink.NewPodCIDRSinkController(
			p.writer(ControllerNodeIPAM).CoreV1().Nodes(), p.informers.Core().V1().Nodes().Lister(), p.eventRecorder(), uint(p.opts.Concurrency),
		)),
	)
}

// registerServiceLB registers LoadBalancer IP allocation: the Service mirror, the allocator, and the sink
// that writes status.loadBalancer.ingress.
func (p *pipeline) registerServiceLB() error {
	services := p.informers.Core().V1().Services()
	writer := p.writer(ControllerServiceLB)

	return errors.Join(
		p.runtime.RegisterController(&kubectrl.KubeServiceController{Informer: services.Informer()}),
		p.runtime.RegisterController(&ipamctrl.ServiceIPAllocatorController{}),
		p.runtime.RegisterQController(k8ssink.NewServiceLBSinkController(
			func(namespace string) k8ssink.ServiceStatusClient { return writer.CoreV1().Services(namespace) },
			services.Lister(), p.eventRecorder(), 8,
		)),
	)
}

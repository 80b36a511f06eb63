package ccm

import (
	"errors"
	"fmt"

	"github.com/cosi-project/runtime/pkg/resource"

	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	ipamctrl "github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	kubectrl "github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	nodectrl "github.com/talos-ccm/talos-ccm/internal/controllers/node"
	talosctrl "github.com/talos-ccm/talos-ccm/internal/controllers/talos"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// controllerGroups registers the controllers of each controller name.
var controllerGroups = map[string]func(*CCM) error{
	ControllerCloudNode:     (*CCM).registerCloudNode,
	ControllerCSRApproval:   (*CCM).registerCSRApproval,
	ControllerNodeIPAM:      (*CCM).registerNodeIPAM,
	ControllerServiceLB:     (*CCM).registerServiceLB,
	ControllerNodeLifecycle: (*CCM).registerNodeLifecycle,
}

// registerSources registers the controllers that mirror outside facts: the config, the Nodes and, when
// the Talos API is given, every machine's facts.
func (c *CCM) registerSources() error {
	c.nodeMirror = &kubectrl.KubeNodeController{Informer: c.informers.Nodes()}

	err := errors.Join(
		c.runtime.RegisterController(c.newConfigSource()),
		c.runtime.RegisterController(c.nodeMirror),
	)

	if c.opts.Talos != nil {
		err = errors.Join(err, c.registerKeyed(&talosctrl.MachineSourceController{
			Talos: c.opts.Talos,
			Options: talosctrl.MachineSourceOptions{
				CallTimeout:     c.opts.TalosTimeout,
				RetryMax:        c.opts.TalosSource.RetryMax,
				PlatformRefresh: c.opts.TalosSource.PlatformRefresh,
				ProbeInterval:   c.opts.TalosSource.ProbeInterval,
			},
		}))
	}

	if err != nil {
		return fmt.Errorf("failed to register sources: %w", err)
	}

	return nil
}

// held names the consumers of the resources of type typ, the controllers that take them as their primary
// input: the resources are written with their finalizers (the mirrors by holdMirrors, the decisions by
// their controllers, which get the returned names), instead of one update of each resource per consumer.
func (c *CCM) held(typ resource.Type, consumers ...interface{ Name() string }) []resource.Finalizer {
	names := make([]resource.Finalizer, 0, len(consumers))
	for _, ctrl := range consumers {
		names = append(names, ctrl.Name())
	}

	if c.heldBy == nil {
		c.heldBy = map[resource.Type][]resource.Finalizer{}
	}

	c.heldBy[typ] = append(c.heldBy[typ], names...)

	return names
}

// holdMirrors gives the mirrors the finalizers of their consumers, once every controller is registered.
func (c *CCM) holdMirrors() {
	c.nodeMirror.Finalizers = c.heldBy[kube.KubeNodeType]

	if c.csrMirror != nil {
		c.csrMirror.Finalizers = c.heldBy[kube.KubeCSRType]
	}
}

// registerCloudNode registers Node initialization: the transform and the node sink.
func (c *CCM) registerCloudNode() error {
	applier := k8ssink.NewNodeApplier(c.writer(ControllerCloudNode).Nodes(), c.logger.Named("node-applier"), k8ssink.NodeApplierOptions{})

	sink := k8ssink.NewNodeSinkController(applier, c.informers.NodeLister(), uint(c.opts.Concurrency),
		k8ssink.WithRuleEvents(k8ssink.NewNodeRuleEvents(c.eventRecorder())))

	transform := nodectrl.NewNodeTransformController(c.held(node.NodeTransformType, sink)...)
	c.held(kube.KubeNodeType, transform)

	return errors.Join(c.registerKeyed(transform), c.registerKeyed(sink))
}

// registerCSRApproval registers kubelet serving certificate approval: the source of pending requests, the
// decisions and the CSR sink. Without machine addresses (no Talos source, no host facts), rule 8, the
// check against the machine's own addresses, is skipped and every decision says so.
func (c *CCM) registerCSRApproval() error {
	requests := c.requestInformers.CertificateSigningRequests()
	talosFacts := c.opts.Talos != nil || c.opts.HostFacts

	// Requests are cached trimmed (k8ssink.TrimCSR): without their managedFields, a decided request without
	// its body, and the strings every kubelet's request repeats shared.
	if err := requests.SetTransform(k8ssink.TrimCSR); err != nil {
		return fmt.Errorf("failed to set up the certificate request informer: %w", err)
	}

	// With machine facts, decisions read the Nodes' addresses as talos-ccm verified them (NodeTransforms),
	// which cloud-node computes; without cloud-node they are computed here, and written nowhere.
	if talosFacts && !c.enabled[ControllerCloudNode] {
		transform := nodectrl.NewNodeTransformController()
		c.held(kube.KubeNodeType, transform)

		if err := c.registerKeyed(transform); err != nil {
			return err
		}
	}

	// Rule 9's facts: the apiserver's endpoints, and the Service ranges from Talos.
	serviceCIDRsFromTalos, err := c.registerReservedSources()
	if err != nil {
		return err
	}

	c.csrMirror = &kubectrl.KubeCSRController{Informer: requests}

	sink := k8ssink.NewCSRSinkController(
		k8ssink.NewCSRApplier(c.writer(ControllerCSRApproval).CertificateSigningRequests()),
		c.requestInformers.CertificateSigningRequestLister(), c.informers.NodeLister(), c.eventRecorder(),
		uint(c.opts.CSRConcurrency),
	)

	decisions := csrctrl.NewCSRDecisionController(csrctrl.CSRDecisionOptions{
		TalosFacts: talosFacts, ServiceCIDRsFromTalos: serviceCIDRsFromTalos, APIServerSource: true,
		Consumers: c.held(csrres.CSRDecisionType, sink),
	})
	c.held(kube.KubeCSRType, decisions)

	return errors.Join(
		c.runtime.RegisterController(c.csrMirror),
		c.registerKeyed(decisions),
		c.registerKeyed(sink),
	)
}

// registerNodeLifecycle registers the shutdown and stale-node verdicts and their sink.
func (c *CCM) registerNodeLifecycle() error {
	sink := k8ssink.NewNodeLifecycleSinkController(
		c.writer(ControllerNodeLifecycle).Nodes(), c.informers.NodeLister(), c.eventRecorder(),
		uint(c.opts.LifecycleConcurrency),
	)

	lifecycle := nodectrl.NewNodeLifecycleController(nodectrl.LifecycleOptions{
		DeleteStaleNodes:         c.opts.NodeLifecycle.DeleteStaleNodes,
		DeletePreemptedSpotNodes: c.opts.NodeLifecycle.DeletePreemptedSpotNodes,
		StaleNodeGrace:           c.opts.NodeLifecycle.StaleNodeGrace,
		Consumers:                c.held(node.NodeLifecycleType, sink),
	})
	c.held(kube.KubeNodeType, lifecycle)

	return errors.Join(c.registerKeyed(lifecycle), c.registerKeyed(sink))
}

// registerNodeIPAM registers pod CIDR allocation: the source of the cluster ranges from Talos when no
// cluster CIDR is given, the allocator, and the sink that writes spec.podCIDRs.
func (c *CCM) registerNodeIPAM() error {
	if err := c.opts.NodeIPAM.Validate(); err != nil {
		return fmt.Errorf("invalid pod CIDR settings: %w", err)
	}

	opts := c.opts.NodeIPAM.controllerOptions().WithDefaults()

	if c.opts.NodeIPAM.NeedsTalos() && c.opts.Talos == nil {
		return errors.New("node-ipam needs the Talos API (a talosconfig) for talos-ipv6 mode or without cluster CIDRs")
	}

	if len(opts.ClusterCIDRs) == 0 {
		if err := c.registerKeyed(c.controllerManagerConfigSource()); err != nil {
			return err
		}
	}

	sink := k8ssink.NewPodCIDRSinkController(
		c.writer(ControllerNodeIPAM).Nodes(), c.informers.NodeLister(), c.eventRecorder(), uint(c.opts.Concurrency),
	)
	c.held(kube.KubeNodeType, sink)

	return errors.Join(
		c.runtime.RegisterController(&ipamctrl.NodeCIDRAllocatorController{Options: opts}),
		c.registerKeyed(sink),
	)
}

// registerServiceLB registers LoadBalancer IP allocation: the Service and Namespace mirrors, the allocator,
// and the sink that writes status.loadBalancer.ingress.
func (c *CCM) registerServiceLB() error {
	writer := c.writer(ControllerServiceLB)

	return errors.Join(
		c.runtime.RegisterController(&kubectrl.KubeServiceController{Informer: c.informers.Services()}),
		c.runtime.RegisterController(&kubectrl.KubeNamespaceController{Informer: c.informers.Namespaces()}),
		c.runtime.RegisterController(&ipamctrl.ServiceIPAllocatorController{}),
		c.registerKeyed(k8ssink.NewServiceLBSinkController(
			func(namespace string) k8ssink.ServiceStatusClient { return writer.Services(namespace) },
			c.informers.ServiceLister(), c.eventRecorder(), uint(c.opts.ServiceConcurrency),
		)),
	)
}

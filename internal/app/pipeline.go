package app

import (
	"errors"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"go.uber.org/zap"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	configctrl "github.com/talos-ccm/talos-ccm/internal/controllers/config"
	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	kubectrl "github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	nodectrl "github.com/talos-ccm/talos-ccm/internal/controllers/node"
	talosctrl "github.com/talos-ccm/talos-ccm/internal/controllers/talos"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
)

// pipeline is what the controller groups are assembled from.
type pipeline struct {
	runtime *runtime.Runtime
	// restConfig builds the writers' clients; clientset reads (informers) and holds the leader lease.
	restConfig *rest.Config
	clientset  kubernetes.Interface
	informers  informers.SharedInformerFactory
	// talos is nil when no talosconfig is available and no enabled controller requires one.
	talos  *client.Client
	config *specs.ConfigSpec
	logger *zap.Logger
	// events is created on first use by eventRecorder.
	events     record.EventRecorder
	stopEvents func()
	opts       Options

	// configSource writes the Config: the flags and the config file.
	configSource *configctrl.ConfigSourceController
}

// eventRecorder returns the recorder of Kubernetes Events shared by the sinks.
func (p *pipeline) eventRecorder() record.EventRecorder {
	if p.events == nil {
		p.events, p.stopEvents = k8ssink.NewEventRecorder(p.writer("events"), p.logger)
	}

	return p.events
}

// writer returns the client one controller writes with. As in kube-controller-manager, every controller
// has its own client, with its own rate limit of --kube-api-qps and --kube-api-burst, so that approving
// certificates or posting events never waits behind a burst of Node writes, and the other way around.
func (p *pipeline) writer(name string) kubernetes.Interface {
	cfg := rest.CopyConfig(p.restConfig)
	cfg.UserAgent = "talos-ccm/" + name

	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		// The same configuration already built the main client: this cannot fail.
		panic(fmt.Sprintf("failed to create the Kubernetes client of %s: %v", name, err))
	}

	return client
}

// close releases what the pipeline started.
func (p *pipeline) close() {
	if p.stopEvents != nil {
		p.stopEvents()
	}
}

// controllerGroups registers the controllers of each --controllers name.
var controllerGroups = map[string]func(*pipeline) error{
	ControllerCloudNode:     (*pipeline).registerCloudNode,
	ControllerCSRApproval:   (*pipeline).registerCSRApproval,
	ControllerNodeIPAM:      (*pipeline).registerNodeIPAM,
	ControllerServiceLB:     (*pipeline).registerServiceLB,
	ControllerNodeLifecycle: (*pipeline).registerNodeLifecycle,
}

// registerSources registers the controllers that mirror outside facts: the config, the Nodes and, when
// the Talos API is available, every machine's facts.
func (p *pipeline) registerSources() error {
	err := errors.Join(
		p.runtime.RegisterController(p.configSource),
		p.runtime.RegisterController(&kubectrl.KubeNodeController{Informer: p.informers.Core().V1().Nodes().Informer()}),
	)

	if p.talos != nil {
		err = errors.Join(err, p.runtime.RegisterController(&talosctrl.MachineSourceController{
			COSI:    p.talos.COSI,
			Options: talosctrl.MachineSourceOptions{CallTimeout: p.opts.TalosTimeout},
		}))
	}

	if err != nil {
		return fmt.Errorf("failed to register sources: %w", err)
	}

	return nil
}

// registerCloudNode registers Node initialization: the transform and the node sink.
func (p *pipeline) registerCloudNode() error {
	applier := k8ssink.NewNodeApplier(p.writer(ControllerCloudNode).CoreV1().Nodes(), p.logger.Named("node-applier"), k8ssink.NodeApplierOptions{})

	return errors.Join(
		p.runtime.RegisterQController(nodectrl.NewNodeTransformController()),
		p.runtime.RegisterQController(k8ssink.NewNodeSinkController(applier, p.informers.Core().V1().Nodes().Lister(), uint(p.opts.Concurrency),
			k8ssink.WithRuleEvents(k8ssink.NewNodeRuleEvents(p.eventRecorder())))),
	)
}

// registerCSRApproval registers kubelet serving certificate approval: the source of pending requests, the
// decisions and the CSR sink. Without the Talos API (no talosconfig), rule 8, the check against the
// machine's own addresses, is skipped and every decision says so.
func (p *pipeline) registerCSRApproval() error {
	requests := p.informers.Certificates().V1().CertificateSigningRequests()

	return errors.Join(
		p.runtime.RegisterController(&kubectrl.KubeCSRController{Informer: requests.Informer()}),
		p.runtime.RegisterQController(csrctrl.NewCSRDecisionController(csrctrl.CSRDecisionOptions{TalosFacts: p.talos != nil})),
		p.runtime.RegisterQController(k8ssink.NewCSRSinkController(
			k8ssink.NewCSRApplier(p.writer(ControllerCSRApproval).CertificatesV1().CertificateSigningRequests()),
			requests.Lister(), p.informers.Core().V1().Nodes().Lister(), p.eventRecorder(),
		)),
	)
}

// registerNodeLifecycle registers the shutdown and stale-node verdicts and their sink.
func (p *pipeline) registerNodeLifecycle() error {
	return errors.Join(
		p.runtime.RegisterQController(nodectrl.NewNodeLifecycleController(nodectrl.LifecycleOptions{
			DeleteStaleNodes:         p.opts.DeleteStaleNodes,
			DeletePreemptedSpotNodes: p.opts.DeletePreemptedSpotNodes,
			StaleNodeGrace:           p.opts.StaleNodeGrace,
		})),
		p.runtime.RegisterQController(k8ssink.NewNodeLifecycleSinkController(
			p.writer(ControllerNodeLifecycle).CoreV1().Nodes(), p.informers.Core().V1().Nodes().Lister(), p.eventRecorder(),
		)),
	)
}

// notImplemented stands for a controller that is not built yet: it says so instead of failing, so that
// the default set keeps working while it is missing.
func notImplemented(name string) func(*pipeline) error {
	return func(p *pipeline) error {
		p.logger.Warn("controller not implemented yet, skipped", zap.String("controller", name))

		return nil
	}
}

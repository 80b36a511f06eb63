package ccm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	configctrl "github.com/talos-ccm/talos-ccm/internal/controllers/config"
	kubectrl "github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/logging"
	"github.com/talos-ccm/talos-ccm/internal/resources"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// CCM is talos-ccm's pipeline for one cluster, in a COSI runtime of its own: what New builds and Run runs.
type CCM struct {
	runtime *runtime.Runtime
	state   state.State
	// conns are the pipeline's Kubernetes connections, one per client (or one in all, with
	// Options.SharedConnection), over the current credentials.
	conns *connections
	// credentials follows the credentials (ClientConfig); nil with a fixed RestConfig.
	credentials *credentials
	informers   *kubeclient.Informers
	// requestInformers watches certificate requests on a connection of its own (connections): their
	// events never wait behind the Node watch's (unless the pipeline's clients share one connection).
	requestInformers *kubeclient.Informers
	opts             Options
	enabled          map[string]bool
	logger           *zap.Logger
	// nodeMirror and csrMirror (nil without csr-approval) are the Node and request mirrors, which get the
	// finalizers of their consumers once every controller is registered (holdMirrors).
	nodeMirror *kubectrl.KubeNodeController
	csrMirror  *kubectrl.KubeCSRController
	// heldBy are, by type, the consumers whose finalizers the resources of that type are written with.
	heldBy map[resource.Type][]resource.Finalizer
	// watches are the watches of state the decision controllers and the sinks share (registerKeyed).
	watches *keyed.Watches

	// events is created on first use by eventRecorder.
	events     k8ssink.EventRecorder
	stopEvents func()

	// ready is closed once Run's informers have synced and its controllers start.
	ready chan struct{}
	// closeOnce makes Close safe to call again (Run closes the pipeline, and so may its caller).
	closeOnce sync.Once
	// releaseStrings releases the pipeline's hold on the tables of shared strings (sharedstrings.Hold).
	releaseStrings func()
}

// New builds talos-ccm's pipeline for one cluster: a COSI runtime over st (nil means a new in-memory
// state, which then belongs to this cluster alone), talos-ccm's namespaces and resource definitions in st
// (those already there are kept, so that st may outlive a pipeline), and the controllers opts selects.
// Every controller has a fixed name (such as "node.NodeTransformController"), so the runtime holds one
// pipeline; a host adds its own controllers under other names (Runtime) before Run. Nothing reaches
// Kubernetes before Start or Run. The caller calls Close when done.
//
// A host that runs many clusters side by side in one state of its own declares them to a
// clusters.Controller (package clusters) instead, which builds each cluster's pipeline with New over the
// cluster's share of the host's state.
func New(ctx context.Context, st state.State, opts Options) (*CCM, error) {
	if st == nil {
		st = cosistate.NewMemoryState()
	}

	given := opts
	opts = opts.WithDefaults()

	// The runtime derives a logger With four fields for every item it reconciles: they are encoded only
	// if it writes, and its routine lines (a reconcile that succeeded) are Debug.
	rt, err := runtime.NewRuntime(st, logging.RuntimeLogger(logging.DeferFields(opts.Logger.Named("runtime"))))
	if err != nil {
		return nil, fmt.Errorf("failed to create controller runtime: %w", err)
	}

	enabled, err := EnabledControllers(opts.Controllers)
	if err != nil {
		return nil, err
	}

	if _, err = labels.Parse(opts.NodeSelector); err != nil {
		return nil, fmt.Errorf("invalid node selector %q: %w", opts.NodeSelector, err)
	}

	c := &CCM{
		runtime: rt,
		state:   st,
		opts:    opts,
		enabled: enabled,
		logger:  opts.Logger,
		ready:   make(chan struct{}),
	}

	base, err := c.clientConfig(ctx)
	if err != nil {
		return nil, err
	}

	if !opts.SkipResourceDefinitions {
		if err = resources.Register(ctx, st); err != nil {
			return nil, err
		}
	}

	c.conns = newConnections(given.withRateLimit(base), c.credentials.unauthorized)
	c.conns.health.changed = opts.CredentialsChanged
	c.conns.shared = opts.SharedConnection

	client, err := c.client("")
	if err != nil {
		c.conns.close()

		return nil, err
	}

	requestClient, err := c.client("")
	if err != nil {
		c.conns.close()

		return nil, err
	}

	c.informers = kubeclient.NewNodeInformers(client, opts.NodeSelector)
	c.requestInformers = kubeclient.NewInformers(requestClient)

	// Nodes are cached without what talos-ccm never reads (images, other managers' managedFields): on a
	// large cluster that is most of a Node's size.
	if err = c.informers.Nodes().SetTransform(k8ssink.NodeTrimmer(c.informers.Nodes().GetStore())); err != nil {
		c.Close()

		return nil, fmt.Errorf("failed to set up the node informer: %w", err)
	}

	if err = c.registerSources(); err != nil {
		c.Close()

		return nil, err
	}

	for _, name := range allControllers {
		if !enabled[name] {
			continue
		}

		if err = controllerGroups[name](c); err != nil {
			c.Close()

			return nil, fmt.Errorf("failed to register controller %s: %w", name, err)
		}
	}

	if err = c.registerPoolMetrics(); err != nil {
		c.Close()

		return nil, err
	}

	c.holdMirrors()

	// The process's tables of shared strings forget what they hold once no pipeline holds them: a host whose
	// clusters were all removed keeps none of their strings.
	c.releaseStrings = sharedstrings.Hold()

	return c, nil
}

// Controllers returns the names of the enabled controllers, sorted.
func (c *CCM) Controllers() []string {
	return slices.Sorted(maps.Keys(c.enabled))
}

// State returns the state the pipeline's controllers run over. The host reads the decisions from it, and
// may write the facts into it.
func (c *CCM) State() state.State { //nolint:ireturn
	return c.state
}

// Runtime returns the pipeline's runtime, to register the host's own controllers into before Run.
func (c *CCM) Runtime() *runtime.Runtime {
	return c.runtime
}

// NodeLister reads the cluster's Nodes from the informer cache the pipeline keeps (no API call), for
// example to count them in a host's metrics.
func (c *CCM) NodeLister() corelisters.NodeLister { //nolint:ireturn
	return c.informers.NodeLister()
}

// Start starts the Kubernetes informers that the sources and sinks read, until ctx is done or Close,
// without running the controllers: a standby replica keeps its caches warm this way, to take over at once.
// Run starts them too; starting them again does nothing.
func (c *CCM) Start(ctx context.Context) {
	c.informers.Start(ctx)
	c.requestInformers.Start(ctx)
}

// WaitForCacheSync waits until the informers have their caches, and reports whether they do (false when
// ctx ends first).
func (c *CCM) WaitForCacheSync(ctx context.Context) bool {
	for _, informers := range []*kubeclient.Informers{c.informers, c.requestInformers} {
		if !informers.WaitForCacheSync(ctx) {
			return false
		}
	}

	return ctx.Err() == nil
}

// Ready is closed once Run's informers have synced and its controllers start.
func (c *CCM) Ready() <-chan struct{} {
	return c.ready
}

// Run starts the informers and, once they have synced, runs the controllers, and follows the credentials
// (Options.ClientConfig), until ctx is done (it returns nil then) or either fails. A pipeline runs once: a
// host that runs a cluster again builds it again with New. The caller closes the pipeline once Run has
// returned (Close): informers that Start started before Run keep running until Start's ctx ends.
//
// The controllers start once the informers have synced, as client-go's own controllers do: a pipeline built
// again over a state that kept its resources reconciles them at once, and a sink that read an empty cache
// then would take every Node for gone until something changed.
func (c *CCM) Run(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The informers start before anything waits for their caches: the shared informers report those not
	// started as synced.
	c.Start(runCtx)

	var (
		wg          sync.WaitGroup
		credentials error
	)

	wg.Go(func() {
		if credentials = c.followCredentials(runCtx); credentials != nil {
			cancel()
		}
	})

	var err error

	if c.WaitForCacheSync(runCtx) {
		close(c.ready)

		err = c.runtime.Run(runCtx)
	}

	cancel()
	wg.Wait()

	switch {
	case credentials != nil:
		return credentials
	case ctx.Err() != nil:
		return nil
	case err == nil || errors.Is(err, context.Canceled):
		return errors.New("talos-ccm runtime stopped on its own")
	default:
		return fmt.Errorf("talos-ccm runtime failed: %w", err)
	}
}

// Close waits for the informers to stop (the ctx they were started with must be done), stops the event
// broadcaster, and closes the connections. Calling it again does nothing.
func (c *CCM) Close() {
	c.closeOnce.Do(func() {
		c.informers.Shutdown()
		c.requestInformers.Shutdown()

		if c.stopEvents != nil {
			c.stopEvents()
		}

		// The informers and the event broadcaster are stopped: nothing uses the connections any more.
		c.conns.close()

		if c.releaseStrings != nil {
			c.releaseStrings()
		}
	})
}

// eventRecorder returns the recorder of Kubernetes Events shared by the sinks.
func (c *CCM) eventRecorder() k8ssink.EventRecorder {
	if c.events == nil {
		writer := c.writer("events")

		c.events, c.stopEvents = k8ssink.NewEventRecorder(func(namespace string) k8ssink.EventWriter {
			return writer.Events(namespace)
		}, kubeclient.Scheme, c.logger)
	}

	return c.events
}

// writer returns the client one controller writes with. As in kube-controller-manager, every controller
// has its own client, with its own rate limit, so that approving certificates or posting events never
// waits behind a burst of Node writes, and the other way around; and its own connection (connections),
// unless Options.SharedConnection puts every client on one.
func (c *CCM) writer(name string) *kubeclient.Client {
	client, err := c.client(name)
	if err != nil {
		// The same configuration already built the informers' clients: this cannot fail.
		panic(fmt.Sprintf("failed to create the Kubernetes client of %s: %v", name, err))
	}

	return client
}

// client returns a client with a connection of its own (or the shared one: Options.SharedConnection), named
// for its user agent ("talos-ccm/<name>").
func (c *CCM) client(name string) (*kubeclient.Client, error) {
	cfg, err := c.conns.config(name)
	if err != nil {
		return nil, err
	}

	return kubeclient.NewForConfig(cfg) //nolint:wrapcheck // It says what failed.
}

// newConfigSource returns the config source: Options.Config, and the config file followed for changes.
func (c *CCM) newConfigSource() *configctrl.ConfigSourceController {
	file := c.opts.ConfigFile

	ctrl := &configctrl.ConfigSourceController{
		Flags:    c.opts.Config,
		Explicit: file.Explicit,
		Path:     file.Path,
		Initial:  file.Initial,
	}

	if file.Path != "" && file.PodNamespace != "" && file.PodName != "" {
		ctrl.Rejected = k8ssink.NewConfigEvents(c.eventRecorder(), file.PodNamespace, file.PodName)
	}

	return ctrl
}

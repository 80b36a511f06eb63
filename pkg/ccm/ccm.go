package ccm

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	configctrl "github.com/talos-ccm/talos-ccm/internal/controllers/config"
	ipamctrl "github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	kubectrl "github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/logging"
	"github.com/talos-ccm/talos-ccm/internal/resources"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// Options configure one talos-ccm pipeline, for one Kubernetes cluster. The zero value of a field means
// its default; RestConfig or ClientConfig is required.
type Options struct {
	// RestConfig is the cluster's Kubernetes client configuration: Nodes, CSRs and Services are read
	// (informers) and written with it. Every controller group writes with its own client and connection,
	// with the user agent "talos-ccm/<controller>" and the rate limit of RestConfig (QPS and Burst). They
	// speak protobuf to the apiserver unless RestConfig (or ClientConfig's answer) names a content type
	// (PreferProtobuf).
	RestConfig *rest.Config
	// ClientConfig, instead of RestConfig, returns the cluster's current client configuration: it is called
	// when the pipeline is built, and again when the apiserver answers 401 Unauthorized (at most every
	// CredentialsRetry) and when the host calls CCM.RefreshCredentials. New credentials for the same
	// apiserver switch every client over at once (open watches reconnect, caches are kept); a configuration
	// that names another apiserver fails the pipeline's run, so that it is built again.
	ClientConfig ClientConfigFunc
	// Logger is the parent of the loggers of the pipeline; nil means no logs. The controllers log through
	// the runtime's logger, a child of Logger named "runtime".
	Logger *zap.Logger
	// Controllers selects the controllers with the syntax of --controllers ("*", "name", "-name"); empty
	// means "*": cloud-node, csr-approval and node-lifecycle.
	Controllers []string
	// Talos is the connection to the Talos API (apid), which the Talos source reads every machine's facts
	// from: a host passes the connection it already holds, such as its machinery client's Conn(). The source
	// calls COSI's State service over it and names the machine of each call in the "node" metadata, as the
	// machinery client's WithNode does. Nil turns the Talos source off: the host then writes
	// PlatformMetadata and MachineAddresses (and, for node-lifecycle, MachineStatus) into the state itself,
	// and no Talos API is ever contacted.
	Talos grpc.ClientConnInterface
	// TalosTimeout bounds every Talos API call; zero means 10s.
	TalosTimeout time.Duration
	// HostFacts says that the host writes MachineAddresses while the Talos source is off: the CSR approver
	// then checks the addresses a kubelet asks a serving certificate for against them (as it does with the
	// Talos source), instead of skipping that check.
	HostFacts bool
	// Config is the configuration in force: cluster name, transformation rules, CSR approval settings. Nil
	// means DefaultConfig(). Start from DefaultConfig() to change a few fields.
	Config *specs.ConfigSpec
	// ConfigFile, when its Path is set, is a talos-ccm config file merged over Config and followed for
	// changes (what talos-ccm's --config does).
	ConfigFile ConfigFile
	// Concurrency bounds the Nodes written at once; zero means 64.
	Concurrency int
	// NodeLifecycle configures the node-lifecycle controller.
	NodeLifecycle NodeLifecycleOptions
	// NodeIPAM configures the node-ipam controller.
	NodeIPAM NodeIPAMOptions
	// CredentialsChanged, if set, is called after every switch to new credentials and every failure to get
	// or use them (see CCM.Credentials), so that a host can show them, as the clusters.Controller's status does.
	CredentialsChanged func()
}

// ConfigFile is a talos-ccm config file (see the README) followed for changes.
type ConfigFile struct {
	// Path is the file; empty means Options.Config alone.
	Path string
	// Initial is the file as already parsed by the caller, so that a bad file is reported before anything
	// starts; nil means the file is read when the pipeline starts.
	Initial *specs.ConfigSpec
	// Explicit lists the ConfigSpec fields (protobuf names, such as "cluster_name", with a dot into a
	// section: "csr_approval.max_expiration_seconds") of Options.Config that win over the file; the file
	// wins over the others.
	Explicit []string
	// PodNamespace and PodName name a Pod that Events about rejected changes of the file are posted on;
	// empty means no such Event.
	PodNamespace, PodName string
}

// NodeLifecycleOptions configure the node-lifecycle controller. The zero value only taints shut-down Nodes.
type NodeLifecycleOptions struct {
	// DeleteStaleNodes deletes NotReady Nodes whose address answers as another machine (after
	// StaleNodeGrace).
	DeleteStaleNodes bool
	// DeletePreemptedSpotNodes deletes NotReady Nodes of GCP spot machines (after StaleNodeGrace).
	DeletePreemptedSpotNodes bool
	// StaleNodeGrace is how long a Node must be NotReady before it may be deleted; zero means 5m.
	StaleNodeGrace time.Duration
}

// NodeIPAMOptions configure the node-ipam controller (pod CIDRs).
type NodeIPAMOptions struct {
	// Mode is "range" (pod CIDRs from ClusterCIDRs; the default) or "talos-ipv6" (IPv6 pod CIDRs carved
	// from each machine's own global IPv6 prefix, which needs the Talos source).
	Mode string
	// ClusterCIDRs are the pod ranges, at most one per family; empty means the ranges of a control-plane
	// machine's Talos ControllerManagerConfig, which needs the Talos source.
	ClusterCIDRs []netip.Prefix
	// MaskIPv4 and MaskIPv6 are the pod CIDR sizes; zero means 24, and 64 (80 in talos-ipv6 mode).
	MaskIPv4, MaskIPv6 int
}

// NeedsTalos reports whether pod CIDR allocation reads the Talos API: for the machines' IPv6 prefixes, or
// for the cluster ranges when ClusterCIDRs is empty.
func (o NodeIPAMOptions) NeedsTalos() bool {
	return o.Mode == ipam.ModeTalosIPv6 || len(o.ClusterCIDRs) == 0
}

// Validate checks the pod CIDR settings.
func (o NodeIPAMOptions) Validate() error {
	return o.controllerOptions().Validate() //nolint:wrapcheck // The caller names the settings.
}

func (o NodeIPAMOptions) controllerOptions() ipamctrl.NodeCIDROptions {
	return ipamctrl.NodeCIDROptions{
		Mode:         o.Mode,
		ClusterCIDRs: o.ClusterCIDRs,
		MaskIPv4:     o.MaskIPv4,
		MaskIPv6:     o.MaskIPv6,
	}
}

// DefaultConfig returns the configuration talos-ccm runs with when no flag and no config file change it:
// a 5m wait for a cloud providerID, cluster.local as the cluster domain, serving certificates of at most
// one year, IPv4 first and no transformation rules.
func DefaultConfig() *specs.ConfigSpec {
	return config.DefaultSpec("embedder")
}

// DefaultOptions returns the options a zero field stands for: no logs, Talos calls bounded by 10s, the
// DefaultConfig, 64 Nodes written at once, and Nodes deleted by node-lifecycle only after 5m NotReady. It
// is the one place these defaults are written: talos-ccm's flags start from it too.
func DefaultOptions() Options {
	return Options{
		Logger:        zap.NewNop(),
		TalosTimeout:  10 * time.Second,
		Config:        DefaultConfig(),
		Concurrency:   64,
		NodeLifecycle: NodeLifecycleOptions{StaleNodeGrace: 5 * time.Minute},
	}
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()

	if o.Logger == nil {
		o.Logger = d.Logger
	}

	if o.TalosTimeout <= 0 {
		o.TalosTimeout = d.TalosTimeout
	}

	if o.Config == nil {
		o.Config = d.Config
	}

	if o.Concurrency <= 0 {
		o.Concurrency = d.Concurrency
	}

	if o.NodeLifecycle.StaleNodeGrace <= 0 {
		o.NodeLifecycle.StaleNodeGrace = d.NodeLifecycle.StaleNodeGrace
	}

	return o
}

// CCM is talos-ccm's pipeline for one cluster, in a COSI runtime of its own: what New builds and Run runs.
type CCM struct {
	runtime *runtime.Runtime
	state   state.State
	// conns are the pipeline's Kubernetes connections, one per client, over the current credentials.
	conns *connections
	// credentials follows the credentials (ClientConfig); nil with a fixed RestConfig.
	credentials *credentials
	informers   *kubeclient.Informers
	// requestInformers watches certificate requests on a connection of its own (connections): their
	// events never wait behind the Node watch's.
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

	// events is created on first use by eventRecorder.
	events     record.EventRecorder
	stopEvents func()

	// ready is closed once Run's informers have synced and its controllers start.
	ready chan struct{}
	// closeOnce makes Close safe to call again (Run closes the pipeline, and so may its caller).
	closeOnce sync.Once
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

	opts = opts.withDefaults()

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

	if err = resources.Register(ctx, st); err != nil {
		return nil, err
	}

	c.conns = newConnections(base, c.credentials.unauthorized)

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

	c.informers = kubeclient.NewInformers(client)
	c.requestInformers = kubeclient.NewInformers(requestClient)

	// Nodes are cached without what talos-ccm never reads (images, other managers' managedFields): on a
	// large cluster that is most of a Node's size.
	if err = c.informers.Nodes().SetTransform(k8ssink.TrimNode); err != nil {
		c.Close()

		return nil, fmt.Errorf("failed to set up the node informer: %w", err)
	}

	if err = c.registerSources(); err != nil {
		c.Close()

		return nil, err
	}

	for _, name := range AllControllers {
		if !enabled[name] {
			continue
		}

		if err = controllerGroups[name](c); err != nil {
			c.Close()

			return nil, fmt.Errorf("failed to register controller %s: %w", name, err)
		}
	}

	c.holdMirrors()

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
	})
}

// eventRecorder returns the recorder of Kubernetes Events shared by the sinks.
func (c *CCM) eventRecorder() record.EventRecorder {
	if c.events == nil {
		c.events, c.stopEvents = k8ssink.NewEventRecorder(c.writer("events").EventSink(), kubeclient.Scheme, c.logger)
	}

	return c.events
}

// writer returns the client one controller writes with. As in kube-controller-manager, every controller
// has its own client, with its own rate limit, so that approving certificates or posting events never
// waits behind a burst of Node writes, and the other way around; and its own connection (connections).
func (c *CCM) writer(name string) *kubeclient.Client {
	client, err := c.client(name)
	if err != nil {
		// The same configuration already built the informers' clients: this cannot fail.
		panic(fmt.Sprintf("failed to create the Kubernetes client of %s: %v", name, err))
	}

	return client
}

// client returns a client with a connection of its own, named for its user agent ("talos-ccm/<name>").
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

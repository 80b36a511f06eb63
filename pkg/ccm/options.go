package ccm

import (
	"cmp"
	"net/netip"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	ipamctrl "github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

// Options configure one talos-ccm pipeline, for one Kubernetes cluster. A zero field stands for its value
// in DefaultOptions; RestConfig or ClientConfig is required.
type Options struct {
	// RestConfig is the cluster's Kubernetes client configuration: Nodes, CSRs and Services are read
	// (informers) and written with it. Every controller group writes with its own client and connection
	// (SharedConnection puts them all on one), with the user agent "talos-ccm/<controller>" and the rate limit of RestConfig (QPS and Burst). They
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
	// NodeSelector, when set, is a label selector (as kubectl's -l: "cluster=a", "tier in (web),!legacy")
	// that narrows the Nodes the pipeline lists and watches to those it selects, so that the clusters of a
	// host that partitions one apiserver between them each see only their own Nodes: only those are
	// initialized, transformed, tainted or deleted by node-lifecycle, given pod CIDRs, and counted. Nothing
	// else is narrowed. Every pipeline on the apiserver sees every kubelet serving certificate request: one
	// of a Node outside its selector waits there (its Node does not exist for it) and is decided by the
	// pipeline of the Node's own cluster, but each pipeline parses it and keeps its decision, so a host
	// with many clusters on one apiserver leaves csr-approval to one of them, or to none. Services
	// (service-lb), Namespaces, the apiserver's EndpointSlices and Events are not narrowed either. Empty
	// means every Node.
	NodeSelector string
	// Talos is the connection to the Talos API (apid), which the Talos source reads every machine's facts
	// from: a host passes the connection it already holds, such as its machinery client's Conn(). The source
	// calls COSI's State service over it and names the machine of each call in the "node" metadata, as the
	// machinery client's WithNode does. Nil turns the Talos source off: the host then writes
	// PlatformMetadata and MachineAddresses (and, for node-lifecycle, MachineStatus) into the state itself,
	// and no Talos API is ever contacted.
	Talos grpc.ClientConnInterface
	// TalosTimeout bounds every Talos API call.
	TalosTimeout time.Duration
	// TalosSource tunes how often the Talos source reads again.
	TalosSource TalosSourceOptions
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
	// SharedConnection sends every Kubernetes request of the pipeline, its informers' watches and every
	// controller's writes, over one HTTP/2 connection to the apiserver, instead of one connection per client.
	// Each client keeps its own rate limit and user agent, and credentials rotate, 401 answers are followed
	// and Close closes the connection as without it. The trade-off: HTTP/2 flow control is per connection, so
	// while thousands of Nodes join, the Node watch's events and the answers to Node writes hold back the
	// certificate request watch's, and approvals wait seconds; with a connection per client they never wait.
	// One connection costs one TLS and HTTP/2 client state (about 10 KiB of heap) and one read loop instead
	// of up to six, for a cluster of a handful of Nodes that is what matters: pkg/ccm/clusters sets it for
	// every cluster it runs, the talos-ccm service does not.
	SharedConnection bool
	// SkipResourceDefinitions keeps New from registering talos-ccm's namespaces and resource definitions in
	// the state's "meta" namespace, where clients discover the types (`ccmctl get rd`). A host that runs many
	// pipelines over one state registers them once instead: pkg/ccm/clusters sets it for every cluster it
	// runs, and clusters.RegisterResources registers talos-ccm's definitions in the host's own "meta"
	// namespace. Each pipeline's copies cost about 16 KiB of heap.
	SkipResourceDefinitions bool
	// KubeAPIQPS and KubeAPIBurst are the rate limit of each of the pipeline's Kubernetes clients (every
	// controller has its own, as in kube-controller-manager). Zero means RestConfig's (or ClientConfig's)
	// own rate limit when it sets one, else DefaultOptions'.
	KubeAPIQPS   float32
	KubeAPIBurst int
	// Concurrency bounds the Nodes written at once, by cloud-node and by node-ipam.
	Concurrency int
	// CSRConcurrency bounds the certificate requests approved or denied at once.
	CSRConcurrency int
	// ServiceConcurrency bounds the Service statuses written at once (service-lb).
	ServiceConcurrency int
	// LifecycleConcurrency bounds the Nodes tainted, untainted or deleted at once (node-lifecycle).
	LifecycleConcurrency int
	// ReconcileConcurrency, when positive, caps the passes each decision controller (NodeTransform,
	// NodeLifecycle, CSRDecision) runs at once, and the runtime's reconcile workers of each queued
	// controller, each a goroutine for the life of the pipeline; zero means each controller's own, sized for
	// thousands of Nodes (4 passes at once for NodeTransform and NodeLifecycle, 16 for CSRDecision). A
	// decision's pass workers start when inputs are queued and end when none is ready: an idle decision
	// controller keeps none. The Concurrency options above bound the writes of the sinks, whose workers
	// start only while writes wait. pkg/ccm/clusters sets it to 1 for a host's clusters, most of them small
	// and idle.
	ReconcileConcurrency int
	// NodeLifecycle configures the node-lifecycle controller.
	NodeLifecycle NodeLifecycleOptions
	// NodeIPAM configures the node-ipam controller.
	NodeIPAM NodeIPAMOptions
	// PoolMetrics shows the pipeline's IP pools and refused allocations in the talos_ccm_ippool_* metrics
	// that the talos-ccm command serves while node-ipam or service-lb runs. Those metrics are the process's
	// and carry no cluster label: one pipeline of a process sets it (the talos-ccm command does); a host
	// that runs several pipelines gives each a PoolFigures of its own instead.
	PoolMetrics bool
	// PoolFigures, if set, is given the figures of the pipeline's IP pools (PoolFigures, sorted by pool)
	// while node-ipam or service-lb runs, whenever they may have changed (at most once a second), and nil
	// when the pipeline stops: for a host's own metrics, under labels of its own. It is called from the
	// pipeline's runtime and must not block. A host that reads its state instead finds each pool's size
	// and use in the pipeline's IPPool resources (IPPools.ipam.tccm.dev), and the refused allocations in
	// its IPAllocations of state failed.
	PoolFigures func([]PoolFigures)
	// CredentialsChanged, if set, is called after every switch to new credentials and every failure to get
	// or use them (see CCM.Credentials), and when the apiserver begins or stops refusing them or being
	// unreachable (see CCM.APIServer), so that a host can show them, as the clusters.Controller's status does.
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
	// StaleNodeGrace is how long a Node must be NotReady before it may be deleted.
	StaleNodeGrace time.Duration
}

// TalosSourceOptions tune how often the Talos source reads the machines again.
type TalosSourceOptions struct {
	// RetryMax caps the backoff of a machine whose reads fail: after a Talos API outage, the machines
	// waiting are read again within RetryMax of its end.
	RetryMax time.Duration
	// PlatformRefresh is how often an uninitialized Node's PlatformMetadata is read again while its
	// machine, on a platform that gives one, has not reported its providerID yet (half to all of it,
	// jittered): well within the wait for a providerID (the config's providerIdWaitSeconds).
	PlatformRefresh time.Duration
	// ProbeInterval is how often the machine of a NotReady Node is asked for its status.
	ProbeInterval time.Duration
	// ControllerManagerConfigRefresh is how often a control-plane machine's ControllerManagerConfig (the
	// cluster's pod and Service ranges) is read again.
	ControllerManagerConfigRefresh time.Duration
	// ControllerManagerConfigRetryMin and ControllerManagerConfigRetryMax bound the backoff after a failed
	// read of it.
	ControllerManagerConfigRetryMin, ControllerManagerConfigRetryMax time.Duration
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

// DefaultOptions returns the options a zero field stands for. It is the one place talos-ccm's defaults are
// written: the talos-ccm command's flags start from it (and so does its --help), the Helm chart's values
// say the same (a test keeps them in step), and the controllers are given them rather than falling back
// on their own.
func DefaultOptions() Options {
	return Options{
		Logger:       zap.NewNop(),
		TalosTimeout: 10 * time.Second,
		TalosSource: TalosSourceOptions{
			RetryMax:                        10 * time.Second,
			PlatformRefresh:                 30 * time.Second,
			ProbeInterval:                   5 * time.Second,
			ControllerManagerConfigRefresh:  5 * time.Minute,
			ControllerManagerConfigRetryMin: time.Second,
			ControllerManagerConfigRetryMax: 30 * time.Second,
		},
		Config:               DefaultConfig(),
		KubeAPIQPS:           500,
		KubeAPIBurst:         1000,
		Concurrency:          64,
		CSRConcurrency:       32,
		ServiceConcurrency:   8,
		LifecycleConcurrency: 8,
		NodeLifecycle:        NodeLifecycleOptions{StaleNodeGrace: 5 * time.Minute},
		// The IPv6 pod CIDR size depends on the mode (64, or 80 in talos-ipv6 mode): zero stands for it.
		NodeIPAM: NodeIPAMOptions{Mode: ipam.ModeRange, MaskIPv4: ipam.DefaultMaskIPv4},
	}
}

// WithDefaults returns o with every zero field set from DefaultOptions.
func (o Options) WithDefaults() Options {
	d := DefaultOptions()

	if o.Logger == nil {
		o.Logger = d.Logger
	}

	if o.Config == nil {
		o.Config = d.Config
	}

	o.TalosTimeout = orDefault(o.TalosTimeout, d.TalosTimeout)

	ts, dts := &o.TalosSource, d.TalosSource
	ts.RetryMax = orDefault(ts.RetryMax, dts.RetryMax)
	ts.PlatformRefresh = orDefault(ts.PlatformRefresh, dts.PlatformRefresh)
	ts.ProbeInterval = orDefault(ts.ProbeInterval, dts.ProbeInterval)
	ts.ControllerManagerConfigRefresh = orDefault(ts.ControllerManagerConfigRefresh, dts.ControllerManagerConfigRefresh)
	ts.ControllerManagerConfigRetryMin = orDefault(ts.ControllerManagerConfigRetryMin, dts.ControllerManagerConfigRetryMin)
	ts.ControllerManagerConfigRetryMax = orDefault(ts.ControllerManagerConfigRetryMax, dts.ControllerManagerConfigRetryMax)

	o.KubeAPIQPS = orDefault(o.KubeAPIQPS, d.KubeAPIQPS)
	o.KubeAPIBurst = orDefault(o.KubeAPIBurst, d.KubeAPIBurst)
	o.Concurrency = orDefault(o.Concurrency, d.Concurrency)
	o.CSRConcurrency = orDefault(o.CSRConcurrency, d.CSRConcurrency)
	o.ServiceConcurrency = orDefault(o.ServiceConcurrency, d.ServiceConcurrency)
	o.LifecycleConcurrency = orDefault(o.LifecycleConcurrency, d.LifecycleConcurrency)
	o.NodeLifecycle.StaleNodeGrace = orDefault(o.NodeLifecycle.StaleNodeGrace, d.NodeLifecycle.StaleNodeGrace)
	o.NodeIPAM.Mode = cmp.Or(o.NodeIPAM.Mode, d.NodeIPAM.Mode)
	o.NodeIPAM.MaskIPv4 = orDefault(o.NodeIPAM.MaskIPv4, d.NodeIPAM.MaskIPv4)

	return o
}

// orDefault is v, or d when v is zero (or negative, which no option means).
func orDefault[T int | float32 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}

	return v
}

// withRateLimit returns a copy of cfg with the options' rate limit: KubeAPIQPS and KubeAPIBurst when set,
// else cfg's own when it sets one, else DefaultOptions'. It reads the options as given, before
// withDefaults.
func (o Options) withRateLimit(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	d := DefaultOptions()
	own := cfg.QPS > 0 || cfg.RateLimiter != nil

	switch {
	case o.KubeAPIQPS > 0:
		cfg.QPS = o.KubeAPIQPS
	case !own:
		cfg.QPS = d.KubeAPIQPS
	}

	switch {
	case o.KubeAPIBurst > 0:
		cfg.Burst = o.KubeAPIBurst
	case !own:
		cfg.Burst = d.KubeAPIBurst
	}

	return cfg
}

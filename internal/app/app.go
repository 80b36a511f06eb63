// Package app assembles talos-ccm: the state, the COSI runtime, the sources, decision controllers and
// sinks, and the clients they use.
package app

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talos-ccm/talos-ccm/internal/api"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// Options configure talos-ccm. The zero value of a field means its default.
type Options struct {
	// RestConfig, when set, is used instead of Kubeconfig (tests, embedding).
	RestConfig *rest.Config
	// Kubeconfig is the kubeconfig file; empty means in-cluster configuration.
	Kubeconfig string
	// TalosConfig is the talosconfig file; empty means $TALOSCONFIG or the in-cluster mount.
	TalosConfig string
	// TalosEndpoints replace the talosconfig's endpoints when set.
	TalosEndpoints []string
	// StateDir holds the persisted decisions; empty keeps everything in memory.
	StateDir string
	// RebuildState moves an unreadable state database aside and starts with an empty one.
	RebuildState bool
	// ClusterName is the clustername label; empty means the talosconfig context name.
	ClusterName string
	// ProviderIDWait is how long a cloud machine's Node waits for an authoritative providerID.
	ProviderIDWait time.Duration
	// Pipeline are the options of the pipeline that talos-ccm runs, as a program that embeds it gives them
	// (ccm.New): the Talos timeout, the concurrency and rate limit, node-lifecycle's deletions. The flags set
	// them; Run adds what it builds itself (the Kubernetes client, the logger, the Talos connection, the
	// controllers, the configuration and the pod CIDR settings) over them. Its KubeAPIQPS and KubeAPIBurst
	// rate-limit talos-ccm's own clients too.
	Pipeline ccm.Options
	// MetricsBindAddress serves /metrics; "" or "0" turns it off.
	MetricsBindAddress string
	// MetricsInsecure serves /metrics (and the profiles) over plain HTTP without authentication
	// (--metrics-secure=false); only accepted with a localhost MetricsBindAddress. By default they are
	// served over HTTPS to callers whose bearer token the apiserver authenticates (TokenReview) and
	// authorizes for `get` on the path (SubjectAccessReview).
	MetricsInsecure bool
	// TLSCertFile and TLSPrivateKeyFile are the serving certificate of the secure metrics server, re-read
	// when they change; without them, a self-signed certificate is generated at start.
	TLSCertFile, TLSPrivateKeyFile string
	// Profiling serves Go's profiles under /debug/pprof/ next to /metrics.
	Profiling bool
	// HealthProbeBindAddress serves /healthz and /readyz; "" or "0" turns it off. It may equal
	// MetricsBindAddress.
	HealthProbeBindAddress string
	// LeaderElection makes only the holder of a Lease run the controllers.
	LeaderElection LeaderElection
	// Controllers selects the controllers as --controllers does ("*", "name", "-name").
	Controllers []string
	// PreferIPv6 makes IPv6 the first family for node IPs and Talos API targets.
	PreferIPv6 bool
	// ClusterDomain is the cluster DNS domain (--cluster-domain): names under it are never approved in
	// serving certificates. Empty means cluster.local, or the config file's global.clusterDomain; set, it
	// wins over the config file.
	ClusterDomain string
	// CSRMaxExpiration is the longest certificate lifetime a kubelet serving certificate request may ask
	// for (--csr-max-expiration); zero means one year. The config file's csrApproval section replaces it.
	CSRMaxExpiration time.Duration
	// PreferIPv6Set marks PreferIPv6 as given explicitly (--prefer-ipv6 on the command line): it then wins
	// over the config file's global.preferIPv6. PreferIPv6 true always counts as explicit.
	PreferIPv6Set bool
	// CSRMaxExpirationSet marks CSRMaxExpiration as given explicitly (--csr-max-expiration on the command
	// line): it then wins over the config file's csrApproval.maxExpirationSeconds.
	CSRMaxExpirationSet bool
	// CSRRequestsPerMinute is how many kubelet serving certificate requests a minute one requester may file
	// before its requests are throttled (--csr-requests-per-minute); zero means 30.
	CSRRequestsPerMinute int
	// DisableBetaTopologyLabels leaves out the deprecated beta topology labels
	// (beta.kubernetes.io/instance-type, failure-domain.beta.kubernetes.io/zone and region), which are set
	// by default as the Kubernetes cloud-node controller does (--beta-topology-labels=false).
	DisableBetaTopologyLabels bool
	// AllocateNodeCIDRs turns the node-ipam controller on, as if it were listed in Controllers
	// (--allocate-node-cidrs).
	AllocateNodeCIDRs bool
	// NodeIPAMMode is "range" (pod CIDRs from ClusterCIDRs; the default) or "talos-ipv6" (IPv6 pod CIDRs
	// carved from each machine's own global IPv6 prefix).
	NodeIPAMMode string
	// ClusterCIDRs are the pod ranges, at most one per family (--cluster-cidr); empty means the ranges of a
	// control-plane machine's Talos ControllerManagerConfig.
	ClusterCIDRs []string
	// NodeCIDRMaskSizeIPv4 and NodeCIDRMaskSizeIPv6 are the pod CIDR sizes; zero means 24, and 64 (80 in
	// talos-ipv6 mode).
	NodeCIDRMaskSizeIPv4, NodeCIDRMaskSizeIPv6 int
	// ServiceClusterIPRanges are the Service ranges (--service-cluster-ip-range): never handed out as pod
	// CIDRs, and never approved in serving certificates. They win over global.serviceCIDRs of the config file.
	ServiceClusterIPRanges []string
	// ConfigFile is the config file (--config): global settings, transformation rules and CSR approval
	// settings, watched and reloaded. Empty means flags only. An invalid file stops Run before anything
	// starts; an invalid change later is rejected and the last good config stays active.
	ConfigFile string
	// PodNamespace and PodName name talos-ccm's own Pod (downward API), which Events about rejected
	// config file changes are posted on; without them, no such Event is posted.
	PodNamespace, PodName string
	// APIListen is where the read-only state API listens: a unix socket path or tcp://HOST:PORT. Empty
	// disables the API (cmd/talos-ccm defaults it to api.DefaultSocket of the state directory).
	APIListen string
	// APITLSCert, APITLSKey and APIClientCA configure mutual TLS, required with a tcp:// APIListen.
	APITLSCert, APITLSKey, APIClientCA string
}

// DefaultOptions returns the values zero Options fields stand for (and the flags' defaults): the embedding
// API's (ccm.DefaultOptions) and its configuration's, plus those of the command alone: leader election.
func DefaultOptions() Options {
	pipeline := ccm.DefaultOptions()

	return Options{
		Pipeline: pipeline,
		// The configuration's defaults, which ccm.DefaultConfig is made of.
		ProviderIDWait:       config.DefaultProviderIDWait,
		CSRMaxExpiration:     config.DefaultCSRMaxExpiration,
		CSRRequestsPerMinute: config.DefaultCSRRequestsPerMinute,
		NodeIPAMMode:         pipeline.NodeIPAM.Mode,
		NodeCIDRMaskSizeIPv4: pipeline.NodeIPAM.MaskIPv4,
		LeaderElection: LeaderElection{
			Namespace:     "kube-system",
			Name:          "talos-ccm",
			LeaseDuration: 15 * time.Second,
			RenewDeadline: 10 * time.Second,
			RetryPeriod:   2 * time.Second,
		},
	}
}

func (o Options) withDefaults() Options {
	defaults := DefaultOptions()

	// The pipeline's own, and the rate limit of talos-ccm's clients.
	o.Pipeline = o.Pipeline.WithDefaults()

	if o.ProviderIDWait < 0 {
		o.ProviderIDWait = 0
	}

	if o.CSRMaxExpiration <= 0 {
		o.CSRMaxExpiration = defaults.CSRMaxExpiration
	}

	if o.CSRRequestsPerMinute <= 0 {
		o.CSRRequestsPerMinute = defaults.CSRRequestsPerMinute
	}

	le, dle := &o.LeaderElection, defaults.LeaderElection

	if le.Namespace == "" {
		le.Namespace = dle.Namespace
	}

	if le.Name == "" {
		le.Name = dle.Name
	}

	if le.LeaseDuration <= 0 {
		le.LeaseDuration = dle.LeaseDuration
	}

	if le.RenewDeadline <= 0 {
		le.RenewDeadline = dle.RenewDeadline
	}

	if le.RetryPeriod <= 0 {
		le.RetryPeriod = dle.RetryPeriod
	}

	return o
}

// Run runs talos-ccm until ctx is cancelled.
func Run(ctx context.Context, opts Options, logger *zap.Logger) error {
	opts = opts.withDefaults()

	if err := validateMetricsOptions(opts); err != nil {
		return err
	}

	// A bad config file is the first thing reported, before any client or controller starts.
	configFile, err := loadConfigFile(opts.ConfigFile)
	if err != nil {
		return err
	}

	restConfig, err := kubeRestConfig(opts)
	if err != nil {
		return err
	}

	apiServer, err := newAPIServerGate(ctx, restConfig, logger)
	if err != nil {
		return fmt.Errorf("failed to create Kubernetes client: %w", err)
	}

	restConfig.Wrap(apiServer.wrap)

	// The lease is renewed with a client of its own: nothing else waits in its rate limiter.
	leaseClient, err := kubeclient.NewForConfig(restConfig)
	if err != nil {
		return err //nolint:wrapcheck // It says what failed.
	}

	enabled, err := EnabledControllers(opts.Controllers)
	if err != nil {
		return err
	}

	if err = applyIPAMFlags(opts, enabled); err != nil {
		return err
	}

	// The Talos API is required to initialize Nodes and watch their lifecycle; the CSR approver uses it
	// when it is configured (the out-of-band address check) and works without it.
	needTalos := enabled[ControllerCloudNode] || enabled[ControllerNodeLifecycle] || nodeIPAMNeedsTalos(opts, enabled)

	talosPath, err := talosConfigPath(opts.TalosConfig)
	if err != nil && needTalos {
		return err
	}

	var (
		talosConn   *talosConn
		contextName string
		// apis are the APIs whose loss makes talos-ccm unready.
		apis = []*reachability{apiServer.reachability}
	)

	if err == nil {
		endpoint := &talosEndpoint{reachability: newReachability("talos", logger)}

		talosConn, contextName, err = newTalosConn(talosPath, opts.TalosEndpoints, endpoint)
		if err != nil {
			return err
		}

		defer talosConn.Close() //nolint:errcheck

		followCtx, stopFollowing := context.WithCancel(ctx)
		defer stopFollowing()

		go endpoint.follow(followCtx, talosConn.ClientConn)

		apis = append(apis, endpoint.reachability)
	}

	flags, explicit := flagsConfig(opts, contextName)
	cfg := configfile.Merge(flags, explicit, configFile)

	st, closeState, err := NewState(ctx, opts.StateDir, opts.RebuildState, logger)
	if err != nil {
		return err
	}

	defer closeState()

	if opts.APIListen != "" {
		apiServer, apiErr := api.Start(ctx, st, api.Options{
			Listen:   opts.APIListen,
			TLSCert:  opts.APITLSCert,
			TLSKey:   opts.APITLSKey,
			ClientCA: opts.APIClientCA,
		}, logger.Named("api"))
		if apiErr != nil {
			return apiErr
		}

		// Stopped before the state is closed: deferred calls run last in, first out.
		defer apiServer.Stop()
	}

	nodeIPAM, err := opts.nodeCIDROptions()
	if err != nil {
		return err
	}

	// The pipeline's options as the flags set them, and what talos-ccm built for it.
	ccmOpts := opts.Pipeline
	ccmOpts.RestConfig = restConfig
	ccmOpts.Logger = logger
	ccmOpts.Controllers = slices.Sorted(maps.Keys(enabled))
	ccmOpts.Config = flags
	ccmOpts.ConfigFile = ccm.ConfigFile{
		Path:         opts.ConfigFile,
		Initial:      configFile,
		Explicit:     explicit,
		PodNamespace: opts.PodNamespace,
		PodName:      opts.PodName,
	}
	ccmOpts.NodeIPAM = nodeIPAM
	// The pool metrics are the process's own, and this is its one pipeline.
	ccmOpts.PoolMetrics = true

	if talosConn != nil {
		ccmOpts.Talos = talosConn.api()
	}

	// talos-ccm assembles itself as a host that runs one cluster does: New builds the pipeline and its
	// runtime over talos-ccm's state, and Run runs it (while leading).
	pipeline, err := ccm.New(ctx, st, ccmOpts)
	if err != nil {
		return err
	}

	// Close waits for the informers, which stop only when the context they started with ends: end it first,
	// also when Run returns while ctx is still alive (a leader that lost its Lease exits). The informers
	// start at once, so that a standby replica is ready to take over; the controllers run while leading.
	informersCtx, stopInformers := context.WithCancel(ctx)

	defer func() {
		stopInformers()
		pipeline.Close()
	}()

	// The lister is asked for before the informers start, so that the Node informer runs even without a
	// controller that reads Nodes.
	metrics.CountNodes(pipeline.NodeLister())
	pipeline.Start(informersCtx)

	logger.Info("talos-ccm started",
		zap.Strings("controllers", slices.Sorted(maps.Keys(enabled))),
		zap.String("state_dir", opts.StateDir),
		zap.String("talosconfig", talosPath),
		zap.String("cluster_name", cfg.ClusterName),
		zap.Bool("leader_elect", opts.LeaderElection.Enabled),
	)

	return runControllers(ctx, opts, pipeline, kubeClients{config: restConfig, lease: leaseClient}, apis, logger)
}

// kubeClients are the Kubernetes clients of talos-ccm's own, beside the pipeline's.
type kubeClients struct {
	// config builds the clients: the metrics port's reviews have one of their own.
	config *rest.Config
	// lease renews the leader lease.
	lease *kubeclient.Client
}

// runControllers serves health and metrics, and runs the controllers: at once, or while leading. /readyz
// fails while one of apis cannot be reached.
func runControllers(ctx context.Context, opts Options, pipeline *ccm.CCM, clients kubeClients, apis []*reachability, logger *zap.Logger) error {
	work := pipeline.Run

	h := &health{apis: apis}

	var (
		le     *leaderElector
		result = make(chan error, 1)
	)

	if opts.LeaderElection.Enabled {
		var err error

		if le, err = newLeaderElector(opts.LeaderElection, clients.lease, logger, work, result); err != nil {
			return err
		}

		h.leader = le.elector
	}

	if err := startHTTP(ctx, opts, h, clients.config, logger); err != nil {
		return err
	}

	go func() {
		// Ready once the informers have their caches: a follower is ready too, to take over at once.
		h.ready.Store(pipeline.WaitForCacheSync(ctx))
	}()

	if le == nil {
		return work(ctx)
	}

	return runLeaderElected(ctx, le, result)
}

func kubeRestConfig(opts Options) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)

	switch {
	case opts.RestConfig != nil:
		cfg = rest.CopyConfig(opts.RestConfig)
	case opts.Kubeconfig != "":
		cfg, err = clientcmd.BuildConfigFromFlags("", opts.Kubeconfig)
	default:
		cfg, err = rest.InClusterConfig()
	}

	if err != nil {
		return nil, fmt.Errorf("failed to load Kubernetes client configuration: %w", err)
	}

	cfg.QPS = opts.Pipeline.KubeAPIQPS
	cfg.Burst = opts.Pipeline.KubeAPIBurst
	cfg.UserAgent = "talos-ccm"
	// Every client built from cfg (the pipeline's, the lease's, the apiserver probe's and the metrics port's
	// reviews) speaks protobuf in all its requests, as kube-controller-manager's do.
	ccm.PreferProtobuf(cfg)
	cfg.Wrap(metrics.CountKubernetesRequests)

	return cfg, nil
}

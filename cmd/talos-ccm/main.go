// Command talos-ccm is the cloud controller manager for Kubernetes clusters whose nodes run Talos Linux.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/pflag"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/api"
	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/logging"
	"github.com/talos-ccm/talos-ccm/internal/memlimit"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/version"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "talos-ccm:", err)
		os.Exit(1)
	}
}

// errVersion is returned by parseFlags for --version: print the version and exit.
var errVersion = errors.New("version requested")

// printVersion writes the line of `talos-ccm --version`.
func printVersion(w io.Writer) {
	fmt.Fprintln(w, "talos-ccm", version.Get())
}

func run() error {
	opts, logLevel, err := parseFlags(os.Args[1:])
	if errors.Is(err, errVersion) {
		printVersion(os.Stdout)

		return nil
	}

	if err != nil {
		return err
	}

	logger, err := logging.New(logLevel)
	if err != nil {
		return err
	}

	defer logger.Sync() //nolint:errcheck

	build := version.Get()
	logger.Info("talos-ccm", zap.String("version", build.Version), zap.String("commit", build.Commit), zap.String("go_version", build.GoVersion))

	// In a container with a memory limit, the garbage collector keeps the heap under it (GOMEMLIMIT wins).
	if limit, source, err := memlimit.Apply(); err != nil {
		logger.Warn("no soft memory limit from the container's", zap.Error(err))
	} else if limit > 0 {
		logger.Info("soft memory limit", zap.Int64("bytes", limit), zap.String("source", string(source)))
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err = app.Run(ctx, opts, logger); err != nil {
		logger.Error("talos-ccm failed", zap.Error(err))

		return err
	}

	logger.Info("talos-ccm stopped")

	return nil
}

// commandFlags are the flags' values that parseFlags turns into app.Options, or that are not options.
type commandFlags struct {
	endpoints   string
	logLevel    string
	showVersion bool
	secure      bool

	betaTopologyLabels bool
}

func parseFlags(args []string) (app.Options, string, error) {
	var (
		opts app.Options
		cmd  commandFlags
	)

	fs := newFlagSet(&opts, &cmd)

	if err := fs.Parse(args); err != nil {
		return opts, "", err
	}

	if cmd.showVersion {
		return opts, "", errVersion
	}

	opts.MetricsInsecure = !cmd.secure

	// An explicit --cluster-domain wins over the config file's global.clusterDomain; the default does not.
	if !fs.Changed("cluster-domain") {
		opts.ClusterDomain = ""
	}

	// An explicit --prefer-ipv6 (true or false) wins over the config file's global.preferIPv6.
	opts.PreferIPv6Set = fs.Changed("prefer-ipv6")

	// An explicit --csr-max-expiration wins over the config file's csrApproval.maxExpirationSeconds.
	opts.CSRMaxExpirationSet = fs.Changed("csr-max-expiration")

	opts.DisableBetaTopologyLabels = !cmd.betaTopologyLabels

	// The Pod that Events about the config file are posted on, from the downward API.
	opts.PodNamespace, opts.PodName = os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")

	// The default socket follows --state-dir; an explicit --api-listen="" disables the API.
	if !fs.Changed("api-listen") {
		opts.APIListen = api.DefaultSocket(opts.StateDir)
	}

	for e := range strings.SplitSeq(cmd.endpoints, ",") {
		if e = strings.TrimSpace(e); e != "" {
			opts.TalosEndpoints = append(opts.TalosEndpoints, e)
		}
	}

	return opts, cmd.logLevel, nil
}

// newFlagSet returns talos-ccm's flags, bound to opts and cmd, with their defaults from app.DefaultOptions
// (and so from the embedding API's ccm.DefaultOptions): what --help shows.
func newFlagSet(opts *app.Options, cmd *commandFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("talos-ccm", pflag.ContinueOnError)
	defaults := app.DefaultOptions()
	talosSource := &opts.Pipeline.TalosSource
	talosSourceDefaults := defaults.Pipeline.TalosSource

	fs.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (empty: in-cluster configuration)")
	fs.StringVar(&opts.ConfigFile, "config", "", "config file: global settings and transformation rules, reloaded when it changes (explicit flags win over it)")
	fs.Float32Var(&opts.Pipeline.KubeAPIQPS, "kube-api-qps", defaults.Pipeline.KubeAPIQPS, "queries per second to the Kubernetes API")
	fs.IntVar(&opts.Pipeline.KubeAPIBurst, "kube-api-burst", defaults.Pipeline.KubeAPIBurst, "burst of queries to the Kubernetes API")
	fs.StringVar(&opts.TalosConfig, "talosconfig", "", "talosconfig file (default: $TALOSCONFIG, then the in-cluster Talos API credentials)")
	fs.StringVar(&cmd.endpoints, "talos-endpoints", os.Getenv("TALOS_ENDPOINTS"), "comma-separated Talos API endpoints replacing the talosconfig's ($TALOS_ENDPOINTS)")
	fs.DurationVar(&opts.Pipeline.TalosTimeout, "talos-timeout", defaults.Pipeline.TalosTimeout, "deadline of every Talos API call")
	fs.DurationVar(&talosSource.RetryMax, "talos-retry-max", talosSourceDefaults.RetryMax, "longest backoff of a machine whose Talos API reads fail: after an outage of the Talos API, the machines are read again within it")
	fs.DurationVar(&talosSource.PlatformRefresh, "talos-platform-refresh-period", talosSourceDefaults.PlatformRefresh, "how often an uninitialized Node's PlatformMetadata is read again while its cloud machine has not reported its providerID (half to all of it, jittered)")
	fs.DurationVar(&talosSource.ProbeInterval, "talos-probe-period", talosSourceDefaults.ProbeInterval, "how often the machine of a NotReady Node is asked for its status")
	fs.DurationVar(&talosSource.ControllerManagerConfigRefresh, "talos-controller-manager-config-refresh-period", talosSourceDefaults.ControllerManagerConfigRefresh, "how often a control-plane machine's ControllerManagerConfig (the cluster's pod and Service ranges) is read again")
	fs.DurationVar(&talosSource.ControllerManagerConfigRetryMin, "talos-controller-manager-config-retry-min", talosSourceDefaults.ControllerManagerConfigRetryMin, "first backoff after a failed read of the ControllerManagerConfig")
	fs.DurationVar(&talosSource.ControllerManagerConfigRetryMax, "talos-controller-manager-config-retry-max", talosSourceDefaults.ControllerManagerConfigRetryMax, "longest backoff after failed reads of the ControllerManagerConfig")
	fs.StringVar(&opts.StateDir, "state-dir", "./state", `directory of the persisted decisions ("" keeps everything in memory)`)
	fs.BoolVar(&opts.RebuildState, "rebuild-state", false, "if the state database cannot be read, move it aside and rebuild the decisions from Kubernetes and Talos")
	fs.StringVar(&opts.ClusterName, "cluster-name", "", "value of the clustername label (default: the talosconfig context name)")
	fs.BoolVar(&opts.PreferIPv6, "prefer-ipv6", false, "IPv6 first for node IPs and Talos API targets on dual-stack nodes")
	fs.DurationVar(&opts.ProviderIDWait, "provider-id-wait", defaults.ProviderIDWait, "how long a cloud machine waits for its providerID from Talos before the talos:// fallback")
	fs.IntVar(&opts.Pipeline.Concurrency, "concurrency", defaults.Pipeline.Concurrency, "Nodes written at once")
	fs.IntVar(&opts.Pipeline.CSRConcurrency, "csr-concurrency", defaults.Pipeline.CSRConcurrency, "certificate requests approved or denied at once")
	fs.IntVar(&opts.Pipeline.ServiceConcurrency, "service-lb-concurrency", defaults.Pipeline.ServiceConcurrency, "Service statuses written at once by service-lb")
	fs.IntVar(&opts.Pipeline.LifecycleConcurrency, "node-lifecycle-concurrency", defaults.Pipeline.LifecycleConcurrency, "Nodes tainted, untainted or deleted at once by node-lifecycle")
	fs.StringSliceVar(&opts.Controllers, "controllers", []string{"*"}, "controllers to run: \"*\" (cloud-node, csr-approval, node-lifecycle), a name to add one (node-ipam, service-lb), -name to remove one")
	fs.BoolVar(&opts.AllocateNodeCIDRs, "allocate-node-cidrs", false, "allocate pod CIDRs to Nodes and set spec.podCIDRs (turns the node-ipam controller on)")
	fs.StringVar(&opts.NodeIPAMMode, "node-ipam-mode", defaults.NodeIPAMMode, `pod CIDRs from the cluster ranges ("range"), or IPv6 ones carved from each machine's own global IPv6 prefix ("talos-ipv6")`)
	fs.StringSliceVar(&opts.ClusterCIDRs, "cluster-cidr", nil, "pod ranges, one per family (default: those of a control-plane machine's Talos ControllerManagerConfig)")
	fs.IntVar(&opts.NodeCIDRMaskSizeIPv4, "node-cidr-mask-size-ipv4", defaults.NodeCIDRMaskSizeIPv4, "prefix length of the IPv4 pod CIDR of each Node")
	fs.IntVar(&opts.NodeCIDRMaskSizeIPv6, "node-cidr-mask-size-ipv6", 0, "prefix length of the IPv6 pod CIDR of each Node (default 64; 80 with --node-ipam-mode=talos-ipv6)")
	fs.StringSliceVar(&opts.ServiceClusterIPRanges, "service-cluster-ip-range", nil, "Service ranges: never pod CIDRs, never approved in serving certificates (default: global.serviceCIDRs of the config file)")
	fs.BoolVar(&opts.Pipeline.NodeLifecycle.DeleteStaleNodes, "delete-stale-nodes", false, "delete a NotReady Node whose address answers as a different machine (after --stale-node-grace)")
	fs.BoolVar(&opts.Pipeline.NodeLifecycle.DeletePreemptedSpotNodes, "delete-preempted-spot-nodes", false, "delete NotReady Nodes of GCP spot machines so that they re-register (after --stale-node-grace)")
	fs.DurationVar(&opts.Pipeline.NodeLifecycle.StaleNodeGrace, "stale-node-grace", defaults.Pipeline.NodeLifecycle.StaleNodeGrace, "how long a Node must be NotReady before it may be deleted")
	fs.StringVar(&opts.APIListen, "api-listen", "", `read-only state API: a unix socket path, or tcp://HOST:PORT with mutual TLS; "" disables it (default: ccm.sock in --state-dir, or in $TMPDIR/talos-ccm-UID without one)`)
	fs.StringVar(&opts.APITLSCert, "api-tls-cert", "", "server certificate of a tcp:// --api-listen")
	fs.StringVar(&opts.APITLSKey, "api-tls-key", "", "server key of a tcp:// --api-listen")
	fs.StringVar(&opts.APIClientCA, "api-client-ca", "", "CA that client certificates of a tcp:// --api-listen must be issued by")
	fs.BoolVar(&opts.LeaderElection.Enabled, "leader-elect", true, "run the controllers only while holding a coordination.k8s.io Lease (for several replicas)")
	fs.StringVar(&opts.LeaderElection.Namespace, "leader-elect-resource-namespace", defaults.LeaderElection.Namespace, "namespace of the leader election Lease")
	fs.StringVar(&opts.LeaderElection.Name, "leader-elect-resource-name", defaults.LeaderElection.Name, "name of the leader election Lease")
	fs.DurationVar(&opts.LeaderElection.LeaseDuration, "leader-elect-lease-duration", defaults.LeaderElection.LeaseDuration, "how long followers wait before taking over a Lease that is not renewed")
	fs.DurationVar(&opts.LeaderElection.RenewDeadline, "leader-elect-renew-deadline", defaults.LeaderElection.RenewDeadline, "how long the leader retries renewing the Lease before giving up leadership")
	fs.DurationVar(&opts.LeaderElection.RetryPeriod, "leader-elect-retry-period", defaults.LeaderElection.RetryPeriod, "how often to try to acquire or renew the Lease")
	fs.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8080", `address of the Prometheus /metrics endpoint ("0" turns it off)`)
	fs.BoolVar(&cmd.secure, "metrics-secure", true, "serve /metrics (and --profiling) over HTTPS to callers whose bearer token the apiserver authenticates and authorizes (TokenReview, SubjectAccessReview for get on the path); false serves plain HTTP, only on a localhost --metrics-bind-address")
	fs.StringVar(&opts.TLSCertFile, "tls-cert-file", "", "serving certificate of the secure metrics endpoint, re-read when it changes (default: a self-signed one generated at start)")
	fs.StringVar(&opts.TLSPrivateKeyFile, "tls-private-key-file", "", "private key of --tls-cert-file")
	fs.BoolVar(&opts.Profiling, "profiling", false, "serve Go's profiles under /debug/pprof/ and the COSI runtime counters under /debug/vars on the metrics address")
	fs.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", ":8081", `address of /healthz and /readyz ("0" turns it off)`)
	fs.StringVar(&opts.ClusterDomain, "cluster-domain", config.DefaultClusterDomain, "cluster DNS domain: names under it are never approved in kubelet serving certificates")
	fs.DurationVar(&opts.CSRMaxExpiration, "csr-max-expiration", defaults.CSRMaxExpiration, "longest certificate lifetime (expirationSeconds) a kubelet serving certificate request may ask for")
	fs.IntVar(&opts.CSRRequestsPerMinute, "csr-requests-per-minute", defaults.CSRRequestsPerMinute, "kubelet serving certificate requests a minute one requester may file before its requests are throttled (decided later)")
	fs.BoolVar(&cmd.betaTopologyLabels, "beta-topology-labels", true, "also set the deprecated beta.kubernetes.io/instance-type, failure-domain.beta.kubernetes.io/zone and region labels, as the Kubernetes cloud-node controller does")
	fs.StringVar(&cmd.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.BoolVar(&cmd.showVersion, "version", false, "print the version, commit and Go version, and exit")

	return fs
}

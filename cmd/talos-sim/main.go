// Command talos-sim serves a simulated fleet of Talos machines behind one apid-like endpoint, and
// optionally acts as their kubelets. See the talossim package for what it serves.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/talos-ccm/talos-ccm/internal/logging"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// options are the command-line flags.
type options struct {
	machines       int
	seed           int64
	fleetFile      string
	printFleet     bool
	listen         string
	unix           string
	talosconfigOut string
	clusterName    string
	kubeconfig     string
	kubeQPS        float32
	kubeBurst      int
	concurrency    int
	controlListen  string
	logLevel       string
}

const controlHelp = `
Control API (--control-listen), HTTP/JSON:
  GET    /machines                           every machine with its faults
  GET    /machines/{name}                    one machine
  POST   /machines                           add a machine (body: a machine, fleet file fields)
  DELETE /machines/{name}                    remove a machine
  PUT    /machines/{name}/latency            {"latency": "250ms"}
  PUT    /machines/{name}/unreachable        {"unreachable": true}
  PUT    /machines/{name}/addresses          [{"linkName": "eth0", "prefix": "10.0.0.5/24", "scope": "global"}]
  PUT    /machines/{name}/stage              {"stage": "shutting down"}
  DELETE /machines/{name}/resources/{kind}   hide platformmetadata|systeminformation|addresses|machinestatus|hostname|controllermanagerconfig|nodename
  PUT    /machines/{name}/resources/{kind}   restore them
  GET    /kubelets/times                     per-node kubelet timestamps (kubelet mode)
  PUT    /kubelets/{name}/ready              {"ready": false} (kubelet mode)
`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "talos-sim:", err)
		os.Exit(1)
	}
}

func run() error {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}

		return err
	}

	machines, err := loadMachines(opts)
	if err != nil {
		return err
	}

	if opts.printFleet {
		return talossim.EncodeFleet(os.Stdout, machines)
	}

	logger, err := logging.New(opts.logLevel)
	if err != nil {
		return err
	}

	defer logger.Sync() //nolint:errcheck

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if err = serve(ctx, opts, machines, logger); err != nil {
		logger.Error("talos-sim failed", zap.Error(err))

		return err
	}

	logger.Info("talos-sim stopped")

	return nil
}

func parseFlags(args []string) (options, error) {
	var opts options

	fs := pflag.NewFlagSet("talos-sim", pflag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "Usage: talos-sim [flags]\n\nServes a simulated Talos fleet (COSI State API routed by the node metadata).\n\nFlags:\n%s%s",
			fs.FlagUsages(), controlHelp)
	}

	fs.IntVar(&opts.machines, "machines", 10, "number of machines to generate (ignored with --fleet)")
	fs.Int64Var(&opts.seed, "seed", 1, "seed of the generated fleet: the same seed gives the same fleet")
	fs.StringVar(&opts.fleetFile, "fleet", "", "YAML fleet file (machines: [...]) instead of a generated fleet")
	fs.BoolVar(&opts.printFleet, "print-fleet", false, "print the fleet as a fleet file and exit")
	fs.StringVar(&opts.listen, "listen", "127.0.0.1:0", `TCP address of the TLS endpoint ("" for none)`)
	fs.StringVar(&opts.unix, "unix", "", "path of a plain-text unix socket endpoint")
	fs.StringVar(&opts.talosconfigOut, "talosconfig-out", "talosconfig", "where to write the talosconfig of the TLS endpoint")
	fs.StringVar(&opts.clusterName, "cluster-name", talossim.DefaultClusterName, "talosconfig context name")
	fs.StringVar(&opts.kubeconfig, "kubeconfig", "", "kubeconfig of a cluster admin: act as the machines' kubelets (register Nodes, submit serving CSRs)")
	fs.Float32Var(&opts.kubeQPS, "kube-qps", talossim.DefaultKubeletQPS, "queries per second of all kubelets together")
	fs.IntVar(&opts.kubeBurst, "kube-burst", talossim.DefaultKubeletBurst, "burst of queries of all kubelets together")
	fs.IntVar(&opts.concurrency, "concurrency", talossim.DefaultKubeletConcurrency, "kubelet requests in flight")
	fs.StringVar(&opts.controlListen, "control-listen", "", "control API address: loopback host:port, or unix:PATH")
	fs.StringVar(&opts.logLevel, "log-level", "info", "log level: debug, info, warn, error")

	if err := fs.Parse(args); err != nil {
		return opts, err
	}

	if fs.NArg() > 0 {
		return opts, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}

	if opts.listen == "" && opts.unix == "" {
		return opts, errors.New("nothing to serve: set --listen or --unix")
	}

	return opts, nil
}

func loadMachines(opts options) ([]talossim.Machine, error) {
	if opts.fleetFile != "" {
		return talossim.LoadFleet(opts.fleetFile)
	}

	if opts.machines < 0 {
		return nil, fmt.Errorf("invalid --machines %d", opts.machines)
	}

	return talossim.Generate(opts.machines, opts.seed), nil
}

// serve runs the Talos endpoint, the kubelets and the control API until ctx ends.
func serve(ctx context.Context, opts options, machines []talossim.Machine, logger *zap.Logger) error {
	fleet, err := talossim.NewFleet(machines)
	if err != nil {
		return err
	}

	cfg := talossim.ServerConfig{Listen: opts.listen, Unix: opts.unix, ClusterName: opts.clusterName}
	if opts.listen != "" {
		cfg.TalosconfigPath = opts.talosconfigOut
	}

	srv, err := talossim.StartServer(fleet, cfg, logger.Named("apid"))
	if err != nil {
		return err
	}

	defer srv.Stop()

	// Scripts read these two lines; the logs go to stderr.
	if srv.Endpoint() != "" {
		fmt.Printf("endpoint: %s\ntalosconfig: %s\n", srv.Endpoint(), srv.TalosconfigPath())
	}

	if srv.UnixPath() != "" {
		fmt.Printf("unix: %s\n", srv.UnixPath())
	}

	logger.Info("fleet ready", zap.Int("machines", fleet.Len()))

	errCh := make(chan error, 2)

	var kubelets *talossim.Kubelets

	if opts.kubeconfig != "" {
		if kubelets, err = startKubelets(ctx, opts, fleet, logger, errCh); err != nil {
			return err
		}
	}

	if opts.controlListen != "" {
		if err = startControl(ctx, opts.controlListen, talossim.NewControlHandler(fleet, kubelets), logger, errCh); err != nil {
			return err
		}
	}

	select {
	case <-ctx.Done():
		return nil
	case err = <-errCh:
		return err
	}
}

func startKubelets(ctx context.Context, opts options, fleet *talossim.Fleet, logger *zap.Logger, errCh chan<- error) (*talossim.Kubelets, error) {
	restCfg, err := clientcmd.BuildConfigFromFlags("", opts.kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("failed to load kubeconfig: %w", err)
	}

	kubelets, err := talossim.NewKubelets(restCfg, fleet.Machines(), talossim.KubeletOptions{
		Logger:      logger.Named("kubelets"),
		Concurrency: opts.concurrency,
		QPS:         opts.kubeQPS,
		Burst:       opts.kubeBurst,
	})
	if err != nil {
		return nil, err
	}

	fleet.OnAdd(kubelets.Add)

	go func() {
		if err := kubelets.Run(ctx); err != nil {
			errCh <- fmt.Errorf("kubelets failed: %w", err)
		}
	}()

	go func() {
		start := time.Now()

		select {
		case <-kubelets.Registered():
			logger.Info("nodes registered", zap.Int("nodes", fleet.Len()), zap.Duration("took", time.Since(start)))
		case <-ctx.Done():
		}
	}()

	return kubelets, nil
}

// startControl serves the control API on a loopback TCP address or a unix socket (unix:PATH).
func startControl(ctx context.Context, addr string, handler http.Handler, logger *zap.Logger, errCh chan<- error) error {
	lis, err := listenControl(addr)
	if err != nil {
		return err
	}

	httpSrv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}

	go func() {
		if err := httpSrv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errCh <- fmt.Errorf("control api failed: %w", err)
		}
	}()

	go func() {
		<-ctx.Done()

		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()

		httpSrv.Shutdown(shutdownCtx) //nolint:errcheck
	}()

	logger.Info("serving control api", zap.String("address", lis.Addr().String()))
	fmt.Printf("control: %s\n", lis.Addr())

	return nil
}

func listenControl(addr string) (net.Listener, error) {
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("failed to remove stale control socket: %w", err)
		}

		lis, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("failed to listen on %q: %w", path, err)
		}

		return lis, nil
	}

	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("invalid --control-listen %q: %w", addr, err)
	}

	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("invalid --control-listen %q: the control API has no authentication, use a loopback address or unix:PATH", addr)
	}

	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %q: %w", addr, err)
	}

	return lis, nil
}

package app

import (
	"context"
	"crypto/tls"
	"errors"
	"expvar"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/delegatedauth"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// health answers /healthz and /readyz.
type health struct {
	// leader checks that a leader renews its lease in time; nil without leader election.
	leader interface{ Check(*http.Request) error }
	ready  atomic.Bool
	// apis say whether the APIs talos-ccm mirrors can be reached: while one cannot, its caches may be stale
	// and talos-ccm is not ready (but healthy: a restart would not bring the API back).
	apis []*reachability
}

func (h *health) healthz(w http.ResponseWriter, req *http.Request) {
	if h.leader != nil {
		if err := h.leader.Check(req); err != nil {
			http.Error(w, "leader election: "+err.Error(), http.StatusInternalServerError)

			return
		}
	}

	fmt.Fprintln(w, "ok")
}

func (h *health) readyz(w http.ResponseWriter, _ *http.Request) {
	if !h.ready.Load() {
		http.Error(w, "caches not synced yet", http.StatusServiceUnavailable)

		return
	}

	for _, api := range h.apis {
		if err := api.check(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)

			return
		}
	}

	fmt.Fprintln(w, "ok")
}

// serveHTTP serves handler on addr until ctx ends, over TLS when tlsConfig is set; "" and "0" mean off.
func serveHTTP(ctx context.Context, name, addr string, tlsConfig *tls.Config, handler http.Handler, logger *zap.Logger) error {
	if addressOff(addr) {
		return nil
	}

	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to listen for %s on %s: %w", name, addr, err)
	}

	scheme := "http"
	if tlsConfig != nil {
		lis, scheme = tls.NewListener(lis, tlsConfig), "https"
	}

	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}

	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server failed", zap.String("server", name), zap.Error(err))
		}
	}()

	go func() {
		<-ctx.Done()

		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()

		srv.Shutdown(shutdownCtx) //nolint:errcheck
	}()

	logger.Info("serving", zap.String("server", name), zap.String("address", lis.Addr().String()), zap.String("scheme", scheme))

	return nil
}

// addressOff says whether a bind address turns its server off.
func addressOff(addr string) bool { return addr == "" || addr == "0" }

// validateMetricsOptions refuses plain HTTP metrics reachable from other hosts: without TLS and delegated
// authorization, anyone who can reach the port could read the metrics and, with --profiling, the profiles.
func validateMetricsOptions(opts Options) error {
	if addressOff(opts.MetricsBindAddress) {
		return nil
	}

	if !opts.MetricsInsecure {
		if (opts.TLSCertFile == "") != (opts.TLSPrivateKeyFile == "") {
			return errors.New("--tls-cert-file and --tls-private-key-file go together")
		}

		return nil
	}

	host, _, err := net.SplitHostPort(opts.MetricsBindAddress)
	if err != nil {
		return fmt.Errorf("failed to parse --metrics-bind-address: %w", err)
	}

	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--metrics-secure=false needs a localhost --metrics-bind-address (such as 127.0.0.1:8080), not %q: "+
			"plain HTTP metrics and profiles must not be reachable from other hosts", opts.MetricsBindAddress)
	}

	return nil
}

// startHTTP serves /metrics, and /healthz with /readyz, on their addresses (one server when they are equal).
// Unless opts.MetricsInsecure, the metrics server speaks HTTPS and serves /metrics and the profiles only to
// callers that the apiserver of restConfig authenticates and authorizes, asked through a client of their
// own; the health probes never ask for a token, on either server.
func startHTTP(ctx context.Context, opts Options, h *health, restConfig *rest.Config, logger *zap.Logger) error {
	if err := validateMetricsOptions(opts); err != nil {
		return err
	}

	var (
		tlsConfig *tls.Config
		protect   = func(h http.Handler) http.Handler { return h }
	)

	if !opts.MetricsInsecure && !addressOff(opts.MetricsBindAddress) {
		var err error

		if tlsConfig, err = servingTLSConfig(opts.TLSCertFile, opts.TLSPrivateKeyFile); err != nil {
			return err
		}

		guard, err := delegatedauth.NewForConfig(restConfig, delegatedauth.Options{Logger: logger.Named("metrics-auth")})
		if err != nil {
			return err
		}

		protect = guard.Wrap
	}

	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", h.healthz)
	probes.HandleFunc("/readyz", h.readyz)

	mux := probes
	if opts.MetricsBindAddress != opts.HealthProbeBindAddress {
		mux = http.NewServeMux()
	}

	mux.Handle("/metrics", protect(metrics.Handler()))

	if opts.Profiling {
		// Go's profiles, for the operator who needs to see where time and memory go.
		mux.Handle("/debug/pprof/", protect(http.HandlerFunc(pprof.Index)))
		mux.Handle("/debug/pprof/cmdline", protect(http.HandlerFunc(pprof.Cmdline)))
		mux.Handle("/debug/pprof/profile", protect(http.HandlerFunc(pprof.Profile)))
		mux.Handle("/debug/pprof/symbol", protect(http.HandlerFunc(pprof.Symbol)))
		mux.Handle("/debug/pprof/trace", protect(http.HandlerFunc(pprof.Trace)))
		// The COSI runtime's own counters: queue lengths, reconciles and requeues per controller.
		mux.Handle("/debug/vars", protect(expvar.Handler()))
	}

	if mux == probes {
		return serveHTTP(ctx, "metrics and health probes", opts.MetricsBindAddress, tlsConfig, probes, logger)
	}

	return errors.Join(
		serveHTTP(ctx, "metrics", opts.MetricsBindAddress, tlsConfig, mux, logger),
		serveHTTP(ctx, "health probes", opts.HealthProbeBindAddress, nil, probes, logger),
	)
}

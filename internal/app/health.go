package app

import (
	"context"
	"errors"
	"expvar"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// health answers /healthz and /readyz.
type health struct {
	// leader checks that a leader renews its lease in time; nil without leader election.
	leader interface{ Check(*http.Request) error }
	ready  atomic.Bool
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

	fmt.Fprintln(w, "ok")
}

// serveHTTP serves handler on addr until ctx ends; "" and "0" mean off.
func serveHTTP(ctx context.Context, name, addr string, handler http.Handler, logger *zap.Logger) error {
	if addr == "" || addr == "0" {
		return nil
	}

	lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("failed to listen for %s on %s: %w", name, addr, err)
	}

	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}

	go func() {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server failed", zap.String("server", name), zap.Error(err))
		}
	}()

	go func() {
		<-ctx.Done()

		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		srv.Shutdown(shutdownCtx) //nolint:errcheck,contextcheck
	}()

	logger.Info("serving", zap.String("server", name), zap.String("address", lis.Addr().String()))

	return nil
}

// startHTTP serves /metrics, and /healthz with /readyz, on their addresses (one server when they are equal).
func startHTTP(ctx context.Context, opts Options, h *health, logger *zap.Logger) error {
	probes := http.NewServeMux()
	probes.HandleFunc("/healthz", h.healthz)
	probes.HandleFunc("/readyz", h.readyz)

	mux := probes
	if opts.MetricsBindAddress != opts.HealthProbeBindAddress {
		mux = http.NewServeMux()
	}

	mux.Handle("/metrics", metrics.Handler())

	if opts.Profiling {
		// Go's profiles, for the operator who needs to see where time and memory go.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		// The COSI runtime's own counters: queue lengths, reconciles and requeues per controller.
		mux.Handle("/debug/vars", expvar.Handler())
	}

	if mux == probes {
		return serveHTTP(ctx, "metrics and health probes", opts.MetricsBindAddress, probes, logger)
	}

	return errors.Join(
		serveHTTP(ctx, "metrics", opts.MetricsBindAddress, mux, logger),
		serveHTTP(ctx, "health probes", opts.HealthProbeBindAddress, probes, logger),
	)
}

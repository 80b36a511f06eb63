package app

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// Timing of the apiserver gate.
const (
	// apiServerProbeInterval is how often the apiserver is asked whether it is back while it is gone: the
	// clients waiting for it resume within this long of its return.
	apiServerProbeInterval = 500 * time.Millisecond
	// apiServerProbeTimeout bounds one probe.
	apiServerProbeTimeout = 2 * time.Second
	// apiServerNotReadyGrace is how long an apiserver that answers, but says it is not ready, is waited
	// for: past it, it is taken as back (it serves, and whatever keeps it unready may never clear).
	apiServerNotReadyGrace = 10 * time.Second
	// apiServerMaxHold bounds how long one request waits at the gate before it is tried and its error
	// returned: a caller learns of a long outage, and no request waits forever on a probe that never
	// succeeds.
	apiServerMaxHold = time.Minute
)

// apiServerGate stands in front of every Kubernetes client of talos-ccm (a rest.Config WrapTransport). When a
// request cannot reach the apiserver (its connection is refused, or cannot be made), the gate records the
// loss, probes the apiserver's /readyz, and holds the requests that can wait (those whose context can end)
// until the apiserver is back, then sends them at once.
//
// Without it, every client backs off on its own: client-go's reflectors double their delay up to 30s, with
// as much jitter again, so after an outage of half a minute the informers resumed 25 to 65s after the
// apiserver's return, in waves, and Nodes joining meanwhile waited as long. A request that failed to
// connect was never sent, so sending it again is safe whatever its verb.
type apiServerGate struct {
	*reachability

	// probe asks whether the apiserver is ready: answered says it answered at all.
	probe func(ctx context.Context) (answered bool, err error)
	// ctx ends the probing (talos-ccm stops).
	ctx     context.Context //nolint:containedctx // The gate outlives every request; it probes until talos-ccm stops.
	probing atomic.Bool
}

// newAPIServerGate returns the gate of the apiserver of cfg, which must not be wrapped by the gate itself:
// its probes go around it.
func newAPIServerGate(ctx context.Context, cfg *rest.Config, logger *zap.Logger) (*apiServerGate, error) {
	probeConfig := rest.CopyConfig(cfg)
	probeConfig.Timeout = apiServerProbeTimeout
	probeConfig.QPS, probeConfig.Burst = -1, 0

	probe, err := kubeclient.NewReadyzProbe(probeConfig)
	if err != nil {
		return nil, err //nolint:wrapcheck // It says what failed.
	}

	return &apiServerGate{
		reachability: newReachability("kubernetes", logger),
		probe:        probe,
		ctx:          ctx,
	}, nil
}

// wrap is the gate as a rest.Config WrapTransport.
func (g *apiServerGate) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		ctx := req.Context()
		// A request whose context never ends (context.Background, as the event sink's posts)
		// is not held: it would wait for as long as the outage lasts.
		hold := ctx.Done() != nil
		deadline := time.Now().Add(apiServerMaxHold)

		for {
			if hold {
				if err := g.await(ctx, deadline); err != nil {
					return nil, err
				}
			}

			sent := time.Now()

			resp, err := next.RoundTrip(req)
			if err == nil || ctx.Err() != nil || !unreachable(err) {
				return resp, err
			}

			g.lost(err, sent)

			if !hold || !time.Now().Before(deadline) {
				return nil, err
			}

			again, resendErr := resend(req)
			if resendErr != nil {
				return nil, err
			}

			req = again
		}
	})
}

// await waits while the apiserver is gone, until deadline at most; it fails only when ctx ends.
func (g *apiServerGate) await(ctx context.Context, deadline time.Time) error {
	back := g.back()
	if back == nil {
		return nil
	}

	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()

	select {
	case <-back:
		return nil
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lost records the loss of the apiserver, seen by a request sent at sent, and starts probing for its
// return, once per outage.
func (g *apiServerGate) lost(err error, sent time.Time) {
	if !g.lose(err, sent) && g.back() == nil {
		// A request sent before the apiserver's return failed after it: nothing new.
		return
	}

	if g.probing.CompareAndSwap(false, true) {
		go g.probeUntilBack()
	}
}

// probeUntilBack probes the apiserver until it is back (or talos-ccm stops), and restores it then.
func (g *apiServerGate) probeUntilBack() {
	ticker := time.NewTicker(apiServerProbeInterval)
	defer ticker.Stop()

	var answeringSince time.Time

	for {
		ctx, cancel := context.WithTimeout(g.ctx, apiServerProbeTimeout)
		answered, err := g.probe(ctx)

		cancel()

		switch {
		case err == nil, answered && !answeringSince.IsZero() && time.Since(answeringSince) >= apiServerNotReadyGrace:
			// The flag is cleared first: a loss recorded from now on starts a probe of its own.
			g.probing.Store(false)
			g.restore()

			return
		case !answered:
			answeringSince = time.Time{}
		case answeringSince.IsZero():
			answeringSince = time.Now()
		}

		select {
		case <-g.ctx.Done():
			g.probing.Store(false)

			return
		case <-ticker.C:
		}
	}
}

// unreachable says whether err is a failure to connect to the apiserver (the request was not sent).
func unreachable(err error) bool {
	if utilnet.IsConnectionRefused(err) {
		return true
	}

	var opErr *net.OpError

	return errors.As(err, &opErr) && opErr.Op == "dial"
}

// resend returns req ready to be sent again: a copy with its body rewound.
func resend(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}

	if req.GetBody == nil {
		return nil, errors.New("failed to resend the request: its body cannot be rewound")
	}

	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}

	out := req.Clone(req.Context())
	out.Body = body

	return out, nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/ctxwait"
)

// LeaseReadWriter is the part of the Lease client an elector uses; Client.Leases returns one, and so does
// client-go's CoordinationV1().Leases.
type LeaseReadWriter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, lease *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, lease *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// LeaseElectorConfig configures a LeaseElector.
type LeaseElectorConfig struct {
	// Leases is the client of the Lease's namespace; Name is the Lease.
	Leases LeaseReadWriter
	Name   string
	// Identity names this elector in the Lease; it must be unique among the electors.
	Identity string
	// LeaseDuration is the term a holder writes: how long the others wait, from the last renewal they saw,
	// before they take the Lease over. RenewDeadline is how long a holder keeps trying to renew before it
	// stops leading; it must be shorter than LeaseDuration. RetryPeriod is the time between two attempts.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnStartedLeading runs, in a goroutine of its own, once the Lease is acquired, with a context that ends
	// when leading stops. OnStoppedLeading is called when Run returns. OnNewLeader is called with the holder's
	// identity whenever it changes, this elector's own included. Each may be nil.
	OnStartedLeading func(ctx context.Context)
	OnStoppedLeading func()
	OnNewLeader      func(identity string)
	// Logger logs the acquisition, the loss and the failed attempts; nil logs nothing.
	Logger *zap.Logger
}

// LeaseElector elects one leader among the processes that share a coordination.k8s.io Lease: the holder
// renews its term, the others take the Lease over once a term ran out unrenewed, and a holder that stops
// releases it. Every write is guarded by the resourceVersion it read, so two electors never both succeed in
// taking the same term.
type LeaseElector struct {
	cfg LeaseElectorConfig

	mu sync.Mutex
	// observed is the Lease as last read or written; lease the object, for the resourceVersion of the next
	// write.
	observed LeaseObservation
	lease    *coordinationv1.Lease
	// leading is set from the acquisition until Run returns.
	leading bool
	// holder is the last holder reported to OnNewLeader.
	holder string
}

// NewLeaseElector checks cfg and returns its elector.
func NewLeaseElector(cfg LeaseElectorConfig) (*LeaseElector, error) {
	switch {
	case cfg.Leases == nil, cfg.Name == "", cfg.Identity == "":
		return nil, errors.New("failed to set up leader election: the Lease client, name and identity are required")
	case cfg.LeaseDuration <= cfg.RenewDeadline:
		return nil, errors.New("failed to set up leader election: the lease duration must be longer than the renew deadline")
	case cfg.RenewDeadline <= cfg.RetryPeriod:
		return nil, errors.New("failed to set up leader election: the renew deadline must be longer than the retry period")
	case cfg.RetryPeriod <= 0:
		return nil, errors.New("failed to set up leader election: the retry period must be positive")
	}

	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}

	return &LeaseElector{cfg: cfg}, nil
}

// Run campaigns for the Lease until it is acquired, then leads while it renews its term, until ctx ends
// or a renewal fails for RenewDeadline (or finds another holder); it then releases the Lease, if it still
// holds it, and returns.
func (e *LeaseElector) Run(ctx context.Context) {
	defer func() {
		e.mu.Lock()
		e.leading = false
		e.mu.Unlock()

		if e.cfg.OnStoppedLeading != nil {
			e.cfg.OnStoppedLeading()
		}
	}()

	if !e.acquire(ctx) {
		return
	}

	leadCtx, stopLeading := context.WithCancel(ctx)
	defer stopLeading()

	if e.cfg.OnStartedLeading != nil {
		go e.cfg.OnStartedLeading(leadCtx)
	}

	if e.renew(ctx) {
		e.cfg.Logger.Error("leader lease lost", zap.String("lease", e.cfg.Name))
	}

	stopLeading()
	e.release()
}

// Check fails when this elector leads but has not renewed its term for longer than LeaseDuration plus
// RenewDeadline: its renewals hang, and another process may lead already. It serves /healthz.
func (e *LeaseElector) Check(*http.Request) error {
	e.mu.Lock()
	defer e.mu.Unlock()

	if e.leading && time.Since(e.observed.At) > e.cfg.LeaseDuration+e.cfg.RenewDeadline {
		return fmt.Errorf("failed to renew the lease %s in time", e.cfg.Name)
	}

	return nil
}

// acquire tries to acquire the Lease every RetryPeriod (with jitter, so that electors do not ask in step)
// until it succeeds (true) or ctx ends (false).
func (e *LeaseElector) acquire(ctx context.Context) bool {
	e.cfg.Logger.Info("attempting to acquire the leader lease", zap.String("lease", e.cfg.Name))

	for {
		attemptCtx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		action, err := e.tryAcquireOrRenew(attemptCtx)

		cancel()

		switch {
		case err != nil && ctx.Err() == nil:
			e.cfg.Logger.Debug("failed to acquire the leader lease", zap.String("lease", e.cfg.Name), zap.Error(err))
		case err == nil && action != LeaseWait:
			e.mu.Lock()
			e.leading = true
			e.mu.Unlock()

			e.cfg.Logger.Info("leader lease acquired", zap.String("lease", e.cfg.Name))

			return true
		}

		jitter := time.Duration(rand.Int64N(int64(e.cfg.RetryPeriod)*6/5 + 1))

		if !ctxwait.Sleep(ctx, e.cfg.RetryPeriod+jitter) {
			return false
		}
	}
}

// renew renews the term every RetryPeriod; each renewal is retried every RetryPeriod for at most
// RenewDeadline. It returns true when a renewal failed for that long, or found another holder; false when
// ctx ended.
func (e *LeaseElector) renew(ctx context.Context) (lost bool) {
	for {
		if !ctxwait.Sleep(ctx, e.cfg.RetryPeriod) {
			return false
		}

		roundCtx, cancel := context.WithTimeout(ctx, e.cfg.RenewDeadline)
		renewed, held := e.renewRound(roundCtx)

		cancel()

		switch {
		case ctx.Err() != nil:
			return false
		case !renewed || held:
			return true
		}
	}
}

// renewRound tries to renew until it succeeds, ctx ends, or another holder is found (held).
func (e *LeaseElector) renewRound(ctx context.Context) (renewed, held bool) {
	for {
		action, err := e.tryAcquireOrRenew(ctx)

		switch {
		case err == nil && action == LeaseWait:
			return false, true
		case err == nil:
			return true, false
		case ctx.Err() == nil:
			e.cfg.Logger.Warn("failed to renew the leader lease", zap.String("lease", e.cfg.Name), zap.Error(err))
		}

		if !ctxwait.Sleep(ctx, e.cfg.RetryPeriod) {
			return false, false
		}
	}
}

// tryAcquireOrRenew reads the Lease and writes what DecideLease decides, guarded by the resourceVersion
// read. It returns the action taken (LeaseWait: none).
func (e *LeaseElector) tryAcquireOrRenew(ctx context.Context) (LeaseAction, error) {
	lease, err := e.cfg.Leases.Get(ctx, e.cfg.Name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return LeaseWait, fmt.Errorf("failed to get lease: %w", err)
	}

	if err != nil {
		lease = nil
	}

	e.mu.Lock()
	previous := e.observed
	e.mu.Unlock()

	in := LeaseInput{Observed: previous, Identity: e.cfg.Identity, Now: time.Now(), Duration: e.cfg.LeaseDuration}
	if lease != nil {
		in.Lease = &lease.Spec
	}

	decision := DecideLease(in)

	var written *coordinationv1.Lease

	switch decision.Action {
	case LeaseWait:
		e.observe(decision.Observed, lease)

		return LeaseWait, nil
	case LeaseCreate:
		written, err = e.cfg.Leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: e.cfg.Name},
			Spec:       decision.Spec,
		}, metav1.CreateOptions{})
	case LeaseRenew, LeaseTake:
		update := lease.DeepCopy()
		update.Spec = decision.Spec
		written, err = e.cfg.Leases.Update(ctx, update, metav1.UpdateOptions{})
	}

	if err != nil {
		// The Lease as read is still what was observed: a conflict is redone from a fresh read.
		e.observe(decision.Observed, lease)

		return LeaseWait, fmt.Errorf("failed to write lease: %w", err)
	}

	e.observe(LeaseObservation{Spec: written.Spec, At: in.Now}, written)

	return decision.Action, nil
}

// observe records what was seen of the Lease, and reports a new holder.
func (e *LeaseElector) observe(observed LeaseObservation, lease *coordinationv1.Lease) {
	e.mu.Lock()

	e.observed, e.lease = observed, lease
	holder := deref(observed.Spec.HolderIdentity)
	changed := holder != e.holder && holder != ""

	if changed {
		e.holder = holder
	}

	e.mu.Unlock()

	if changed && e.cfg.OnNewLeader != nil {
		e.cfg.OnNewLeader(holder)
	}
}

// release gives the Lease up, when this elector still holds it as last observed, so that another takes
// over at once instead of after a term. Its request is bounded by RenewDeadline: the process is stopping.
func (e *LeaseElector) release() {
	e.mu.Lock()
	lease := e.lease
	e.mu.Unlock()

	if lease == nil || deref(lease.Spec.HolderIdentity) != e.cfg.Identity {
		return
	}

	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RenewDeadline)
	defer cancel()

	update := lease.DeepCopy()
	update.Spec = ReleasedLease(lease.Spec, time.Now())

	written, err := e.cfg.Leases.Update(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		e.cfg.Logger.Warn("failed to release the leader lease", zap.String("lease", e.cfg.Name), zap.Error(err))

		return
	}

	e.observe(LeaseObservation{Spec: written.Spec, At: time.Now()}, written)
	e.cfg.Logger.Info("leader lease released", zap.String("lease", e.cfg.Name))
}

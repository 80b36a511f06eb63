package talos

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// machineFacts is what one session learned about one machine; nil fields are unchanged.
type machineFacts struct {
	platform  *specs.PlatformMetadataSpec
	addresses *specs.MachineAddressesSpec
	status    *specs.MachineStatusSpec
	name      string
	ip        string
}

// sessionOptions tune how a machine is read.
type sessionOptions struct {
	// CallTimeout bounds every Talos call, and the wait for a watch's first contents.
	CallTimeout time.Duration
	// RetryMin and RetryMax bound the backoff after a failed session.
	RetryMin, RetryMax time.Duration
	// PlatformRefresh is how often PlatformMetadata is read again on a machine that refused its watch
	// (or whose watch failed). A machine whose watch works is never read again on a timer.
	PlatformRefresh time.Duration
	// ProbeInterval is how often a machine whose Node is NotReady is asked directly for its status. A
	// watch does not say when a machine stops answering (the client resumes it silently), and whether a
	// NotReady Node's machine answers, and as which machine, is what lifecycle verdicts are made of.
	ProbeInterval time.Duration
}

// machineSession reads one machine through the Talos API and keeps its facts current with watches. It
// runs until its context is cancelled; failures back off for this machine only.
type machineSession struct {
	// probe is wanted while the machine's Node is NotReady.
	probe   *probeWish
	cosi    state.State
	updates chan<- machineFacts
	logger  *zap.Logger
	name    string
	ip      string
	opts    sessionOptions
}

func (s *machineSession) run(ctx context.Context) {
	backoff := s.opts.RetryMin

	for {
		started := time.Now()
		err := s.session(ctx)

		if ctx.Err() != nil {
			return
		}

		s.logger.Debug("talos session ended", zap.String("node", s.name), zap.String("ip", s.ip), zap.Error(err))

		var other *otherMachineError

		if errors.As(err, &other) {
			// The machine answers, as another node: it is asked again after the backoff, and none of its
			// facts is filed under this Node's name.
			s.send(ctx, machineFacts{status: &specs.MachineStatusSpec{
				Reachable:    true,
				LastError:    err.Error(),
				NodeIp:       s.ip,
				Nodename:     other.nodename,
				NodenameRead: true,
				LastSeen:     timestamppb.Now(),
			}})
		} else {
			s.send(ctx, machineFacts{status: &specs.MachineStatusSpec{
				Reachable: false,
				LastError: errorText(err),
				NodeIp:    s.ip,
			}})
		}

		if time.Since(started) > s.opts.RetryMax {
			// The session worked for a while: start the backoff over.
			backoff = s.opts.RetryMin
		}

		// Jitter spreads the retries of many machines that failed together (an endpoint outage).
		wait := backoff/2 + rand.N(backoff/2+1)

		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}

		backoff = min(backoff*2, s.opts.RetryMax)
	}
}

// session reads the machine once, then follows its addresses and machine status until something fails.
func (s *machineSession) session(ctx context.Context) error {
	ctx, cancel := context.WithCancel(client.WithNode(ctx, s.ip))
	defer cancel()

	// The machine's facts are this Node's only when the machine says it is this Node: the address the
	// session asks through is the kubelet's claim, and may lead to any machine.
	if err := s.readIdentity(ctx); err != nil {
		return err
	}

	platform, err := s.readPlatform(ctx)
	if err != nil {
		return err
	}

	// Small buffers: a session drains its watches at once, and thousands of sessions each holding dozens
	// of buffered events would cost more memory than the machines' facts themselves.
	addrCh := make(chan state.Event, 8)
	err = s.cosi.WatchKind(ctx, network.NewAddressStatus(network.NamespaceName, "").Metadata(), addrCh, state.WithBootstrapContents(true))
	countWatch(network.AddressStatusType, err)

	if err != nil {
		return fmt.Errorf("failed to watch addresses: %w", err)
	}

	// PlatformMetadata changes (a zone after a migration, a spot flag) reach the transformation rules
	// within seconds, and an idle machine costs no Talos call and no timer. Only a machine that refuses
	// the watch (or whose watch fails) is read again every PlatformRefresh.
	refresh := time.NewTimer(time.Hour)
	refresh.Stop()

	defer refresh.Stop()

	var platformCh chan state.Event

	periodicReads := func() {
		platformCh = nil

		refresh.Reset(jitter(s.opts.PlatformRefresh))
	}

	platformCh = make(chan state.Event, 1)
	err = s.cosi.Watch(ctx, runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID).Metadata(), platformCh)
	countWatch(runtime.PlatformMetadataType, err)

	if err != nil {
		s.logger.Debug("platform metadata watch refused, periodic reads only", zap.String("node", s.name), zap.Error(err))

		periodicReads()
	}

	addresses := map[resource.ID]*network.AddressStatusSpec{}
	bootstrapped := false
	status := &specs.MachineStatusSpec{Reachable: true, NodeIp: s.ip, MachineUuid: platform.GetUuid(), Nodename: s.name, NodenameRead: true}

	// The machine's stage matters only while its Node is NotReady (lifecycle verdicts): it is read here,
	// then by the probes of NotReady Nodes, instead of by a watch per machine, whose stream and goroutines
	// would cost memory on every machine of a large cluster.
	if status.Stage, err = s.readStage(ctx); err != nil {
		return err
	}

	// A NotReady Node's machine is probed at once when the Node turns NotReady, then every ProbeInterval,
	// and once more when it is Ready again, so that the stage is fresh on both transitions.
	probing := false

	probeTimer := time.NewTimer(s.opts.ProbeInterval)
	probeTimer.Stop()

	defer probeTimer.Stop()

	firstContents := time.NewTimer(s.opts.CallTimeout)
	defer firstContents.Stop()

	// A machine wanted probed before this session started (or restarted) is probed as after a change.
	if s.probe.wanted.Load() {
		s.probe.signal()
	}

	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-firstContents.C:
			if !bootstrapped {
				return fmt.Errorf("no address list from the machine within %s", s.opts.CallTimeout)
			}
		case <-s.probe.changed:
			wanted := s.probe.wanted.Load()
			if wanted == probing {
				continue
			}

			probing = wanted
			probeTimer.Stop()

			if !bootstrapped {
				// Probed when the interval passes, by then with the machine's contents.
				if probing {
					probeTimer.Reset(s.opts.ProbeInterval)
				}

				continue
			}

			if err := s.probeMachine(ctx, status, platform); err != nil {
				return err
			}

			if probing {
				probeTimer.Reset(s.opts.ProbeInterval)
			}
		case <-probeTimer.C:
			if !probing {
				continue
			}

			if bootstrapped {
				if err := s.probeMachine(ctx, status, platform); err != nil {
					return err
				}
			}

			probeTimer.Reset(s.opts.ProbeInterval)
		case <-refresh.C:
			refreshed, err := s.readPlatform(ctx)
			if err != nil {
				return err
			}

			platform = refreshed

			s.send(ctx, machineFacts{platform: refreshed})
			refresh.Reset(jitter(s.opts.PlatformRefresh))
		case ev := <-platformCh:
			var pm *runtime.PlatformMetadataSpec

			switch ev.Type {
			case state.Errored:
				s.logger.Debug("platform metadata watch failed, periodic reads only", zap.String("node", s.name), zap.Error(ev.Error))

				periodicReads()

				continue
			case state.Bootstrapped, state.Noop:
				continue
			case state.Created, state.Updated:
				if typed, ok := ev.Resource.(*runtime.PlatformMetadata); ok {
					pm = typed.TypedSpec()
				}
			case state.Destroyed:
			}

			// The first event is the state read just before: only a change is sent.
			if updated := withPlatformMetadata(platform, pm); !proto.Equal(updated, platform) {
				platform = updated

				if bootstrapped {
					s.send(ctx, machineFacts{platform: platform})
				}
			}
		case ev := <-addrCh:
			switch ev.Type {
			case state.Errored:
				return fmt.Errorf("address watch failed: %w", ev.Error)
			case state.Created, state.Updated:
				if as, ok := ev.Resource.(*network.AddressStatus); ok {
					addresses[as.Metadata().ID()] = as.TypedSpec()
				}
			case state.Destroyed:
				delete(addresses, ev.Resource.Metadata().ID())
			case state.Bootstrapped:
				bootstrapped = true
				status.LastSeen = timestamppb.Now()

				s.send(ctx, machineFacts{platform: platform, status: cloneStatus(status)})
			case state.Noop:
				continue
			}

			if bootstrapped {
				list := make([]*network.AddressStatusSpec, 0, len(addresses))
				for _, a := range addresses {
					list = append(list, a)
				}

				addrs := addressFacts(list, s.ip)
				addrs.Nodename = s.name

				s.send(ctx, machineFacts{addresses: addrs})
			}
		}
	}
}

// probeMachine asks a machine for its status and identity. A machine that does not answer is reported
// unreachable, but the session goes on: its watches resume by themselves when it answers again.
func (s *machineSession) probeMachine(ctx context.Context, status *specs.MachineStatusSpec, platform *specs.PlatformMetadataSpec) error {
	res, err := s.get(ctx, runtime.NewMachineStatus().Metadata())
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}

		if status.GetReachable() {
			status.Reachable = false
			status.LastError = err.Error()
			s.send(ctx, machineFacts{status: cloneStatus(status)})
		}

		return nil
	}

	// A machine renamed, or replaced by another one at the same address, ends the session: the facts kept
	// are those of the machine that was this Node.
	if err = s.readIdentity(ctx); err != nil {
		var other *otherMachineError
		if errors.As(err, &other) {
			return err
		}

		return nil //nolint:nilerr // the next probe tells
	}

	refreshed, err := s.readPlatform(ctx)
	if err != nil {
		return nil //nolint:nilerr // the next probe tells
	}

	if ms, ok := res.(*runtime.MachineStatus); ok {
		status.Stage = stageName(ms.TypedSpec())
	}

	changedIdentity := refreshed.GetUuid() != platform.GetUuid()

	status.Reachable = true
	status.LastError = ""
	status.MachineUuid = refreshed.GetUuid()
	status.LastSeen = timestamppb.Now()

	update := machineFacts{status: cloneStatus(status)}
	if changedIdentity {
		update.platform = refreshed
	}

	s.send(ctx, update)

	return nil
}

// otherMachineError says that the machine answering at the session's address is not the session's Node:
// it names itself another node, or none.
type otherMachineError struct {
	ip, node, nodename string
}

func (e *otherMachineError) Error() string {
	return talos.OtherMachineReason(e.ip, e.node, e.nodename, true)
}

// readIdentity reads the Kubernetes node name the machine says it is, and fails with an
// otherMachineError unless it is the session's Node.
func (s *machineSession) readIdentity(ctx context.Context) error {
	res, err := s.get(ctx, k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID).Metadata())
	if err != nil {
		return fmt.Errorf("failed to read the machine's node name: %w", err)
	}

	nodename := ""

	if typed, ok := res.(*k8s.Nodename); ok {
		nodename = typed.TypedSpec().Nodename
	}

	if nodename != s.name {
		return &otherMachineError{ip: s.ip, node: s.name, nodename: clean(nodename[:min(len(nodename), maxFieldLength)])}
	}

	return nil
}

// readPlatform reads PlatformMetadata and SystemInformation (either may be absent) of the machine that
// said it is the session's Node.
func (s *machineSession) readPlatform(ctx context.Context) (*specs.PlatformMetadataSpec, error) {
	var (
		pm *runtime.PlatformMetadataSpec
		si *hardware.SystemInformationSpec
	)

	res, err := s.get(ctx, runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID).Metadata())
	if err != nil {
		return nil, fmt.Errorf("failed to read platform metadata: %w", err)
	}

	if typed, ok := res.(*runtime.PlatformMetadata); ok {
		pm = typed.TypedSpec()
	}

	res, err = s.get(ctx, hardware.NewSystemInformation(hardware.SystemInformationID).Metadata())
	if err != nil {
		return nil, fmt.Errorf("failed to read system information: %w", err)
	}

	if typed, ok := res.(*hardware.SystemInformation); ok {
		si = typed.TypedSpec()
	}

	facts := platformFacts(pm, si, s.ip)
	facts.Nodename = s.name

	return facts, nil
}

// get reads one resource with a deadline; a resource the machine does not have is nil, not an error.
func (s *machineSession) get(ctx context.Context, ptr resource.Pointer) (resource.Resource, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()

	res, err := s.cosi.Get(ctx, ptr)

	switch {
	case err == nil:
		metrics.TalosCalls.WithLabelValues("get", ptr.Type(), "ok").Inc()
	case state.IsNotFoundError(err):
		metrics.TalosCalls.WithLabelValues("get", ptr.Type(), "not_found").Inc()

		return nil, nil
	default:
		metrics.TalosCalls.WithLabelValues("get", ptr.Type(), "error").Inc()
	}

	return res, err
}

func (s *machineSession) send(ctx context.Context, f machineFacts) {
	f.name, f.ip = s.name, s.ip

	select {
	case s.updates <- f:
	case <-ctx.Done():
	}
}

func cloneStatus(s *specs.MachineStatusSpec) *specs.MachineStatusSpec {
	return proto.CloneOf(s)
}

// readStage reads the machine's stage; a machine without MachineStatus has none.
func (s *machineSession) readStage(ctx context.Context) (string, error) {
	res, err := s.get(ctx, runtime.NewMachineStatus().Metadata())
	if err != nil {
		return "", fmt.Errorf("failed to read machine status: %w", err)
	}

	if ms, ok := res.(*runtime.MachineStatus); ok {
		return stageName(ms.TypedSpec()), nil
	}

	return "", nil
}

func countWatch(typ string, err error) {
	result := "ok"
	if err != nil {
		result = "error"
	}

	metrics.TalosCalls.WithLabelValues("watch", typ, result).Inc()
}

func errorText(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return "session ended"
	}

	return err.Error()
}

func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

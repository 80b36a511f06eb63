package talos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// machineFacts is what one session learned about one machine; nil fields are unchanged.
type machineFacts struct {
	platform  *specs.PlatformMetadataSpec
	addresses *specs.MachineAddressesSpec
	status    *specs.MachineStatusSpec
	machineRef
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

// machineSessionSpec is the task that keeps one Node's machine session. A new IP restarts the session
// (machineWorker), a Node turning NotReady or Ready does not: the session learns it through probe, which
// a running session keeps.
type machineSessionSpec struct {
	// probe is wanted while the machine's Node is NotReady.
	probe *probeWish
	cosi  state.State
	machineRef
	opts sessionOptions
}

// RunTask implements task.Spec: the session retries with its own backoff, and returns only when ctx ends.
func (spec machineSessionSpec) RunTask(ctx context.Context, _ *zap.Logger, in workerInput[machineFacts]) error {
	s := &machineSession{machineSessionSpec: spec, workerInput: in}
	s.run(ctx)

	return nil
}

// machineSession reads one machine through the Talos API and keeps its facts current with watches. It
// runs until its context is cancelled; failures back off for this machine only.
type machineSession struct {
	machineSessionSpec
	workerInput[machineFacts]
}

// run holds a session with the machine until ctx ends. After a session failed, the machine is reported
// unreachable (or answering as another node), and asked again after a backoff of its own.
func (s *machineSession) run(ctx context.Context) {
	backoff := newRetryBackoff(s.opts.RetryMin, s.opts.RetryMax)

	for {
		started := time.Now()
		err := s.session(ctx)

		if ctx.Err() != nil {
			return
		}

		s.ended(ctx, err)

		if time.Since(started) > s.opts.RetryMax {
			// The session worked for a while: start the backoff over.
			backoff.reset()
		}

		if !backoff.wait(ctx) {
			return
		}
	}
}

// session connects to the machine, then follows it until something fails: each event has its method.
func (s *machineSession) session(ctx context.Context) error {
	ctx, cancel := context.WithCancel(client.WithNode(ctx, s.ip))
	defer cancel()

	c := newConnection(s)
	defer c.close()

	if err := c.connect(ctx); err != nil {
		return err
	}

	for {
		var err error

		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev := <-c.addressEvents:
			err = c.addressEvent(ctx, ev)
		case ev := <-c.platformEvents:
			c.platformEvent(ctx, ev)
		case <-c.refresh.C:
			err = c.refreshPlatform(ctx)
		case <-s.probe.changed:
			err = c.probeWishChanged(ctx)
		case <-c.probes.due():
			err = c.probeMachine(ctx)
		}

		if err != nil {
			return err
		}
	}
}

// ended reports why a session ended in MachineStatus.
func (s *machineSession) ended(ctx context.Context, err error) {
	s.logger.Debug("talos session ended", zap.String("node", s.node), zap.String("ip", s.ip), zap.Error(err))

	var other *otherMachineError

	if errors.As(err, &other) {
		// The machine answers, as another node: it is asked again after the backoff, and none of its facts
		// is filed under this Node's name.
		s.send(ctx, machineFacts{status: &specs.MachineStatusSpec{
			Reachable:    true,
			LastError:    err.Error(),
			NodeIp:       s.ip,
			Nodename:     other.nodename,
			NodenameRead: true,
			LastSeen:     timestamppb.Now(),
		}})

		return
	}

	s.send(ctx, machineFacts{status: &specs.MachineStatusSpec{
		Reachable: false,
		LastError: errorText(err),
		NodeIp:    s.ip,
	}})
}

// connection is one session's hold on its machine: the facts it sent, the watches that keep them current,
// and when to read again or probe.
type connection struct {
	*machineSession

	platform  *specs.PlatformMetadataSpec
	status    *specs.MachineStatusSpec
	addresses map[resource.ID]*network.AddressStatusSpec

	addressEvents chan state.Event
	// platformEvents is nil once the machine refused or failed the PlatformMetadata watch: refresh fires
	// then.
	platformEvents chan state.Event
	refresh        *time.Timer
	probes         *probeSchedule
}

func newConnection(s *machineSession) *connection {
	refresh := time.NewTimer(s.opts.PlatformRefresh)
	refresh.Stop()

	return &connection{
		machineSession: s,
		addresses:      map[resource.ID]*network.AddressStatusSpec{},
		refresh:        refresh,
		probes:         newProbeSchedule(s.opts.ProbeInterval),
	}
}

func (c *connection) close() {
	c.refresh.Stop()
	c.probes.stop()
}

// connect reads the machine, starts the watches that keep its facts current, waits for the addresses,
// and sends the facts. The machine's facts are read only once it said it is the session's Node: the
// address the session asks through is the kubelet's claim, and may lead to any machine.
func (c *connection) connect(ctx context.Context) error {
	if err := c.readIdentity(ctx); err != nil {
		return err
	}

	platform, err := c.readPlatform(ctx)
	if err != nil {
		return err
	}

	c.platform = platform
	c.status = &specs.MachineStatusSpec{Reachable: true, NodeIp: c.ip, MachineUuid: platform.GetUuid(), Nodename: c.node, NodenameRead: true}

	if err = c.watch(ctx); err != nil {
		return err
	}

	// The machine's stage matters only while its Node is NotReady (lifecycle verdicts): it is read here,
	// then by the probes of NotReady Nodes, instead of by a watch per machine, whose stream and goroutines
	// would cost memory on every machine of a large cluster.
	if c.status.Stage, err = c.readStage(ctx); err != nil {
		return err
	}

	if err = c.awaitAddresses(ctx); err != nil {
		return err
	}

	c.status.LastSeen = timestamppb.Now()

	c.send(ctx, machineFacts{platform: c.platform, status: cloneStatus(c.status)})
	c.sendAddresses(ctx)

	// What connect read is the first probe of a machine whose Node is NotReady already.
	c.probes.want(c.probe.wanted.Load())
	c.probes.probed()

	return nil
}

// watch starts the watches of the machine's addresses and PlatformMetadata. PlatformMetadata changes (a
// zone after a migration, a spot flag) reach the transformation rules within seconds, and an idle machine
// costs no Talos call and no timer; only a machine that refuses the watch is read again every
// PlatformRefresh.
func (c *connection) watch(ctx context.Context) error {
	// Small buffers: a session drains its watches at once, and thousands of sessions each holding dozens
	// of buffered events would cost more memory than the machines' facts themselves.
	c.addressEvents = make(chan state.Event, 8)
	err := c.cosi.WatchKind(ctx, network.NewAddressStatus(network.NamespaceName, "").Metadata(), c.addressEvents, state.WithBootstrapContents(true))
	countWatch(network.AddressStatusType, err)

	if err != nil {
		return fmt.Errorf("failed to watch addresses: %w", err)
	}

	c.platformEvents = make(chan state.Event, 1)
	err = c.cosi.Watch(ctx, runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID).Metadata(), c.platformEvents)
	countWatch(runtime.PlatformMetadataType, err)

	if err != nil {
		c.logger.Debug("platform metadata watch refused, periodic reads only", zap.String("node", c.node), zap.Error(err))

		c.readPeriodically()
	}

	return nil
}

// readPeriodically replaces the PlatformMetadata watch with reads every PlatformRefresh (jittered).
func (c *connection) readPeriodically() {
	c.platformEvents = nil

	c.refresh.Reset(jitter(c.opts.PlatformRefresh))
}

// awaitAddresses takes in the address watch's first contents, which must come within CallTimeout.
func (c *connection) awaitAddresses(ctx context.Context) error {
	timeout := time.NewTimer(c.opts.CallTimeout)
	defer timeout.Stop()

	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timeout.C:
			return fmt.Errorf("no address list from the machine within %s", c.opts.CallTimeout)
		case ev := <-c.addressEvents:
			if ev.Type == state.Bootstrapped {
				return nil
			}

			if err := c.applyAddressEvent(ev); err != nil {
				return err
			}
		}
	}
}

// addressEvent applies one event of the address watch, and sends the addresses it changed.
func (c *connection) addressEvent(ctx context.Context, ev state.Event) error {
	if ev.Type == state.Bootstrapped || ev.Type == state.Noop {
		return nil
	}

	if err := c.applyAddressEvent(ev); err != nil {
		return err
	}

	c.sendAddresses(ctx)

	return nil
}

// applyAddressEvent applies one event of the address watch to the addresses the connection knows.
func (c *connection) applyAddressEvent(ev state.Event) error {
	switch ev.Type {
	case state.Errored:
		return fmt.Errorf("address watch failed: %w", ev.Error)
	case state.Created, state.Updated:
		if as, ok := ev.Resource.(*network.AddressStatus); ok {
			c.addresses[as.Metadata().ID()] = as.TypedSpec()
		}
	case state.Destroyed:
		delete(c.addresses, ev.Resource.Metadata().ID())
	case state.Bootstrapped, state.Noop:
	}

	return nil
}

func (c *connection) sendAddresses(ctx context.Context) {
	list := make([]*network.AddressStatusSpec, 0, len(c.addresses))
	for _, a := range c.addresses {
		list = append(list, a)
	}

	addrs := addressFacts(list, c.ip)
	addrs.Nodename = c.node

	c.send(ctx, machineFacts{addresses: addrs})
}

// platformEvent applies one event of the PlatformMetadata watch, and sends the platform facts it changed.
// A failed watch gives way to periodic reads.
func (c *connection) platformEvent(ctx context.Context, ev state.Event) {
	var pm *runtime.PlatformMetadataSpec

	switch ev.Type {
	case state.Errored:
		c.logger.Debug("platform metadata watch failed, periodic reads only", zap.String("node", c.node), zap.Error(ev.Error))

		c.readPeriodically()

		return
	case state.Bootstrapped, state.Noop:
		return
	case state.Created, state.Updated:
		if typed, ok := ev.Resource.(*runtime.PlatformMetadata); ok {
			pm = typed.TypedSpec()
		}
	case state.Destroyed:
	}

	// The first event is the state read just before: only a change is sent.
	if updated := withPlatformMetadata(c.platform, pm); !proto.Equal(updated, c.platform) {
		c.platform = updated

		c.send(ctx, machineFacts{platform: updated})
	}
}

// refreshPlatform reads the platform facts of a machine without a PlatformMetadata watch, when
// PlatformRefresh passed.
func (c *connection) refreshPlatform(ctx context.Context) error {
	refreshed, err := c.readPlatform(ctx)
	if err != nil {
		return err
	}

	c.platform = refreshed

	c.send(ctx, machineFacts{platform: refreshed})
	c.refresh.Reset(jitter(c.opts.PlatformRefresh))

	return nil
}

// probeWishChanged probes the machine when its Node turned NotReady or Ready again.
func (c *connection) probeWishChanged(ctx context.Context) error {
	if !c.probes.want(c.probe.wanted.Load()) {
		return nil
	}

	return c.probeMachine(ctx)
}

// probeMachine asks the machine for its status and identity, and schedules the next probe. A machine that
// does not answer is reported unreachable, but the session goes on: its watches resume by themselves when
// it answers again. A machine that answers as another node ends the session.
func (c *connection) probeMachine(ctx context.Context) error {
	defer c.probes.probed()

	res, err := c.get(ctx, runtime.NewMachineStatus().Metadata())
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}

		if c.status.GetReachable() {
			c.status.Reachable = false
			c.status.LastError = err.Error()
			c.send(ctx, machineFacts{status: cloneStatus(c.status)})
		}

		return nil
	}

	// A machine renamed, or replaced by another one at the same address, ends the session: the facts kept
	// are those of the machine that was this Node.
	if err = c.readIdentity(ctx); err != nil {
		var other *otherMachineError
		if errors.As(err, &other) {
			return err
		}

		return nil //nolint:nilerr // the next probe tells
	}

	refreshed, err := c.readPlatform(ctx)
	if err != nil {
		return nil //nolint:nilerr // the next probe tells
	}

	if ms, ok := res.(*runtime.MachineStatus); ok {
		c.status.Stage = stageName(ms.TypedSpec())
	}

	changedIdentity := refreshed.GetUuid() != c.platform.GetUuid()

	c.status.Reachable = true
	c.status.LastError = ""
	c.status.MachineUuid = refreshed.GetUuid()
	c.status.LastSeen = timestamppb.Now()

	update := machineFacts{status: cloneStatus(c.status)}
	if changedIdentity {
		update.platform = refreshed
	}

	c.send(ctx, update)

	return nil
}

// send hands a fact of the session's machine to the controller.
func (s *machineSession) send(ctx context.Context, f machineFacts) {
	f.machineRef = s.machineRef

	s.deliver(ctx, f)
}

func cloneStatus(s *specs.MachineStatusSpec) *specs.MachineStatusSpec {
	return proto.CloneOf(s)
}

func errorText(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return "session ended"
	}

	return err.Error()
}

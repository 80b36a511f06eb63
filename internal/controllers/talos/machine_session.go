package talos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// machineFacts is what one session learned about one machine; nil fields are unchanged. The session keeps
// none of them: the controller owns what it receives.
type machineFacts struct {
	platform *specs.PlatformMetadataSpec
	// platformMetadata are the facts of a re-read of the machine's PlatformMetadata alone: they replace that
	// part of the stored platform facts, whose others (SystemInformation's, the machine type) stay.
	platformMetadata *specs.PlatformMetadataSpec
	addresses        *specs.MachineAddressesSpec
	status           *specs.MachineStatusSpec
	machineRef
}

// sessionOptions tune how a machine is read.
type sessionOptions struct {
	// CallTimeout bounds every Talos call, and the wait for a watch's first contents.
	CallTimeout time.Duration
	// RetryMin and RetryMax bound the backoff after a failed session.
	RetryMin, RetryMax time.Duration
	// PlatformRefresh is how often PlatformMetadata is read again while the machine's Node is uninitialized
	// and its platform's providerID has not come yet (half to all of it, jittered).
	PlatformRefresh time.Duration
	// ProbeInterval is how often a machine whose Node is NotReady is asked directly for its status. A
	// watch does not say when a machine stops answering (the client resumes it silently), and whether a
	// NotReady Node's machine answers, in which stage, and as which machine, is what lifecycle verdicts are
	// made of.
	ProbeInterval time.Duration
	// Intake, when set, bounds the sessions that read their machine (see sessionIntake); nil: no bound.
	Intake *sessionIntake
}

// addressSettle is how long after a change of its address set a machine's PlatformMetadata is read again:
// the events of one change (a link with its IPv4 and IPv6 addresses) cost one read.
const addressSettle = time.Second

// machineSessionSpec is the task that keeps one Node's machine session. A new IP restarts the session
// (machineWorker), a Node turning NotReady, Ready or initialized does not: the session learns it through
// condition, which a running session keeps.
type machineSessionSpec struct {
	condition *nodeCondition
	api       talosAPI
	machineRef
	opts sessionOptions
	// retry is made by the first session of the spec's worker.
	retry *sessionRetry
}

// RunTask implements task.Spec: it holds one session with the machine on ctx, which the session ends
// (workerInput.end) when it fails; its worker then runs it again on a fresh context, and the next session
// reports why the last one ended and waits out a backoff of its own first. It returns errParked when the
// session waits for its watch's next message holding no goroutine: the worker is run again when it comes
// (workerInput.resume), and RunTask then goes on with the session.
func (spec *machineSessionSpec) RunTask(ctx context.Context, _ *zap.Logger, in workerInput[machineFacts]) error {
	if spec.retry == nil {
		spec.retry = &sessionRetry{backoff: newRetryBackoff(spec.opts.RetryMin, spec.opts.RetryMax)}
	}

	s := &machineSession{machineSessionSpec: spec, workerInput: in}

	return s.run(ctx)
}

// sessionRetry is what the sessions of one worker hand on to the next: the backoff, and how the last one
// ended; and, while the session waits for its watch holding no goroutine, its connection. Only the
// worker's goroutine uses it (one at a time: a parked worker's next one starts once the last one parked).
type sessionRetry struct {
	backoff *retryBackoff
	// ended is set once a session ended by itself; err is why.
	ended bool
	err   error
	// parked is the connection of the session that waits for its watch's next message.
	parked *connection
	// started is when the last session was admitted.
	started time.Time
}

// machineSession reads one machine through the Talos API and keeps its addresses current with a watch. It
// runs until its context ends; failures back off for this machine only.
//
// An idle machine costs one watch stream and no call: PlatformMetadata, which a running machine keeps
// from its boot, is read at the session's start and again only when something suggests it changed: a
// probe of the NotReady Node's machine (a reboot, a migration), a change of the machine's address set,
// and, every PlatformRefresh, while the Node waits for a providerID its platform has not reported yet. A
// watch broken by a machine that stopped answering resumes once it answers again; one broken by a reboot
// cannot (its bookmark names a state the machine no longer has), which starts the session over. The stage
// is read only for NotReady Nodes, the only ones whose verdicts it is part of.
//
// A session refers to its spec, which lives as long as its worker, rather than holding a copy of it: what
// the controller reads of a running spec (its machine, its Node's condition) never changes, or is atomic.
type machineSession struct {
	*machineSessionSpec
	workerInput[machineFacts]
}

// errSessionEnded is the cause a session ends its context with when it returns, unless something ended it
// before: run tells it from a stop, whose cause is context.Canceled.
var errSessionEnded = errors.New("the session ended")

// run holds a session with the machine until it fails or ctx ends, or goes on with the session that parked
// (see follow). After the last session failed, the machine is reported unreachable (or answering as another
// node), and asked again after a backoff of its own. It returns errParked when the session parked, nil
// otherwise.
func (s *machineSession) run(ctx context.Context) error {
	if c := s.retry.parked; c != nil {
		s.retry.parked = nil

		return s.over(ctx, s.keep(c, true))
	}

	if r := s.retry; r.ended {
		r.ended = false

		_ = offStack(func() error {
			s.ended(ctx, r.err)

			return nil
		})

		if !r.backoff.wait(ctx) {
			return nil
		}
	}

	// The session waits for its turn in the intake here, beneath no frame of session's: waiting in a select
	// takes the most stack of what the session's goroutine does itself.
	admitted, err := s.opts.Intake.enter(ctx)

	s.retry.started = time.Now()

	return s.over(ctx, s.session(ctx, admitted, err))
}

// over returns errParked when the session parked; else the session is over, ended by err, which the next
// one reports unless the worker was stopped.
func (s *machineSession) over(ctx context.Context, err error) error {
	if errors.Is(err, errParked) {
		return err
	}

	// A session ends its context with errSessionEnded, or with what ended it; a stopped worker's (or the
	// controller's) ends with Canceled. A stopped worker does not run the session again.
	if errors.Is(context.Cause(ctx), context.Canceled) {
		return nil
	}

	s.retry.ended, s.retry.err = true, err

	if time.Since(s.retry.started) > s.opts.RetryMax {
		// The session worked for a while: start the backoff over.
		s.retry.backoff.reset()
	}

	return nil
}

// session connects to the machine, then follows its address watch until something fails (see keep). The
// session's goroutine is the only one it keeps while it connects: what it does besides (probes, reads of
// PlatformMetadata, its Node's changes of condition, the intake's hold) runs when due, on a goroutine that
// lasts as long as that work (see waking). That goroutine stays shallow: it only waits for its turn in the
// intake (run, admitted or err) and for the stream's data, and hands everything else (making its
// connection, connecting, receiving and applying every message, closing) to a goroutine that ends with
// that work (see offStack), so that it fits in the smallest stack (2 KiB): a goroutine keeps the size its
// deepest call needed, and one that ever went deeper than about 1.1 KiB keeps 4 KiB.
func (s *machineSession) session(ctx context.Context, admitted *admission, err error) error {
	var c *connection

	_ = offStack(func() error {
		c = newConnection(s, withNode(ctx, s.ip), s.end)

		return nil
	})

	kept := false

	defer func() {
		if !kept {
			_ = offStack(c.close)
		}
	}()

	c.admit(admitted)

	if err == nil {
		err = offStack(func() error { return c.open(admitted) })
	}

	if err != nil {
		return err
	}

	kept = true

	return s.keep(c, false)
}

// errParked is what a session returns when it waits for its watch's next message holding no goroutine.
var errParked = errors.New("the session waits for its watch")

// keep follows the connection's watch (see follow), and closes the connection once the session ends: when
// the watch fails, or when applying a message panics.
func (s *machineSession) keep(c *connection, ready bool) (err error) {
	defer func() {
		if !errors.Is(err, errParked) {
			_ = offStack(c.close)
		}
	}()

	return s.follow(c, ready)
}

// follow applies the watch's messages until the watch fails; ready says a message (or the watch's end) is
// there to be taken. Over a stream that calls back when its next message comes (talos-ccm's own), the
// session parks between messages: it keeps its connection in its retry state, returns errParked, and its
// goroutine ends; the stream then runs the worker again on a goroutine of its own, which applies the message
// and parks again. An idle session so holds no goroutine at all. Over another stream (a host's gRPC
// connection), its goroutine waits on the stream, and hands each message to one that applies it: the frames
// beneath its wait are all its stack.
func (s *machineSession) follow(c *connection, ready bool) error {
	parks, canPark := c.watch.parkable()

	// A goroutine that parks next ends with the message: it need not keep its stack small.
	work := offStack
	if canPark {
		work = func(f func() error) error { return f() }
	}

	for {
		if ready {
			if err := work(c.watchMessage); err != nil {
				return err
			}
		}

		if canPark {
			s.retry.parked = c
			parks.OnReady(s.resume)

			return errParked
		}

		c.watch.wait()

		ready = true
	}
}

// open connects to the machine once admitted, and starts the session's work due.
func (c *connection) open(admitted *admission) error {
	if err := admitted.read(func() error { return c.connect(c.ctx) }, c.wake); err != nil {
		return err
	}

	c.start()

	return nil
}

// watchMessage receives and applies the watch's next message, or what receiving it failed with: it fails
// when the watch cannot go on.
func (c *connection) watchMessage() error {
	frame, err := c.watch.take()

	events, err := c.watch.events(c.ctx, frame, err)
	if err != nil {
		return c.endedBy(err)
	}

	c.addressEvents(c.ctx, events)

	return nil
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

// connection is one session's hold on its machine: the facts it sent, the watch that keeps the addresses
// current, and when to probe or read PlatformMetadata again. Its session's goroutine reads the watch; the
// work due besides runs on a goroutine of its own (waking); mu makes them take turns.
type connection struct {
	*machineSession

	// ctx is the session's; cancel ends it, with the cause the session returns.
	ctx    context.Context //nolint:containedctx // The session's work due runs on timers, outside its calls.
	cancel context.CancelCauseFunc

	waking

	// mu guards what follows: the session's goroutine holds it while it connects and while it applies
	// events of the watch, the work due while it runs.
	mu sync.Mutex

	// providerIDToCome is set while the machine's platform gives a providerID that Talos has not reported
	// yet (see providerIDToCome). It is all the session keeps of its platform facts: thousands of idle
	// sessions each holding a copy of them, beside the one the state stores, cost more than the facts
	// themselves. A probe or a re-read sends what it read, and the controller writes only what changed.
	providerIDToCome bool
	status           machineStatus
	// addresses are what the session keeps of the machine's AddressStatuses.
	addresses sessionAddresses
	// excluded are the prefixes whose addresses are not the machine's own (its shared virtual IPs, the
	// cluster's pod and service ranges), read once per session.
	excluded []string

	watch    *addressWatch
	admitted *admission
	probes   *probeSchedule
	reread   *rereadSchedule
}

func newConnection(s *machineSession, ctx context.Context, cancel context.CancelCauseFunc) *connection { //nolint:revive // ctx is the session's, kept.
	c := &connection{
		machineSession: s,
		ctx:            ctx,
		cancel:         cancel,
	}

	c.work = func() {
		if err := c.due(); err != nil {
			c.cancel(err)
		}
	}
	c.probes = newProbeSchedule(s.opts.ProbeInterval, c.wake)
	c.reread = newRereadSchedule(c.wake)

	return c
}

// admit keeps the session's place in the intake, until its Node is initialized or the intake's hold passed.
func (c *connection) admit(a *admission) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.admitted = a
}

// start lets the Node's changes of condition wake the session, and looks at the condition once: it may have
// changed while the session connected.
func (c *connection) start() {
	c.condition.follow(c.wake)
	c.wake()
}

// close ends the session's context, waits for its work due, and lets its timers and its place in the intake
// go.
func (c *connection) close() error {
	c.cancel(errSessionEnded)
	c.condition.follow(nil)
	c.stopWaking()

	c.mu.Lock()
	defer c.mu.Unlock()

	c.probes.stop()
	c.reread.stop()
	c.admitted.release()

	return nil
}

// endedBy is why the session ended when its watch failed with err: what ended its context, if anything did
// (a probe that found another machine, a failed read of PlatformMetadata, the session stopped), else err.
func (c *connection) endedBy(err error) error {
	if c.ctx.Err() != nil {
		return context.Cause(c.ctx)
	}

	return err
}

// due runs the work due: the Node initialized, or holding its place in the intake for too long, gives it to
// the next; a change of the Node's condition is acted on; a probe or a read of PlatformMetadata due is made.
func (c *connection) due() error {
	c.mu.Lock()
	defer c.mu.Unlock()

	ctx := c.ctx
	if ctx.Err() != nil {
		return nil
	}

	if !c.condition.uninitialized.Load() || c.admitted.expired(time.Now()) {
		// Released, the admission is let go: the session lasts as long as its Node.
		c.admitted.release()
		c.admitted = nil
	}

	if c.condition.takeChange() {
		if err := c.conditionChanged(ctx); err != nil {
			return err
		}
	}

	if c.probes.isDue(time.Now()) {
		if err := c.probeMachine(ctx); err != nil {
			return err
		}
	}

	if c.reread.isDue(time.Now()) {
		return c.rereadPlatform(ctx)
	}

	return nil
}

// connect reads the machine, starts the watch that keeps its addresses current, waits for the addresses,
// and sends the facts. The machine's facts are read only once it said it is the session's Node: the
// address the session asks through is the kubelet's claim, and may lead to any machine.
func (c *connection) connect(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()

	if err := c.readIdentity(ctx); err != nil {
		return err
	}

	platform, err := c.readPlatform(ctx)
	if err != nil {
		return err
	}

	if c.excluded, err = c.readExcludedPrefixes(ctx); err != nil {
		return err
	}

	c.providerIDToCome = providerIDToCome(platform)
	c.status = machineStatus{reachable: true, uuid: platform.GetUuid()}

	// The watch of the machine's addresses: an address change reaches the Node within seconds, and an idle
	// machine costs no Talos call and no timer. Its opening and its first contents must come within
	// CallTimeout: a stream has no deadline of its own, so the session's context ends at it.
	timeout := time.AfterFunc(c.opts.CallTimeout, func() {
		c.cancel(fmt.Errorf("%w within %s", errNoAddressList, c.opts.CallTimeout))
	})

	c.watch, err = openAddressWatch(ctx, c.api, c.opts.RetryMin, c.opts.RetryMax)
	if err == nil {
		err = c.awaitAddresses(ctx)
	}

	timeout.Stop()

	if err != nil {
		return c.endedBy(err)
	}

	// The stage matters only while the Node is NotReady (lifecycle verdicts): only then is it read, and
	// what connect read is the Node's first probe.
	if c.probes.want(c.condition.notReady.Load()) {
		if c.status.stage, err = c.readStage(ctx); err != nil {
			return err
		}
	}

	c.status.lastSeen = time.Now().UnixNano()

	c.send(ctx, machineFacts{platform: platform, status: c.statusFacts()})
	c.sendAddresses(ctx)

	c.probes.probed()
	c.scheduleReread()

	return nil
}

// errNoAddressList ends a session whose machine did not send its addresses within CallTimeout.
var errNoAddressList = errors.New("no address list from the machine")

// awaitAddresses takes in the address watch's first contents.
func (c *connection) awaitAddresses(ctx context.Context) error {
	for {
		events, err := c.watch.next(ctx)
		if err != nil {
			return c.endedBy(err)
		}

		for _, ev := range events {
			if ev.typ == v1alpha1.EventType_BOOTSTRAPPED {
				c.addresses = c.addresses.compact()

				return nil
			}

			c.addresses.apply(ev)
		}
	}
}

// addressEvents applies events of the address watch, and sends the addresses if they changed. A changed
// address set (not a changed flag) also calls for a read of PlatformMetadata: the platform that gives a
// machine a new address may have moved it. The set sent last is not kept: the addresses before the events
// give it.
func (c *connection) addressEvents(ctx context.Context, events []addressEvent) {
	c.mu.Lock()
	defer c.mu.Unlock()

	before := c.addresses.compact()
	changed := false

	for _, ev := range events {
		changed = c.addresses.apply(ev) || changed
	}

	if !changed {
		return
	}

	if sent := c.sendAddresses(ctx); !slices.Equal(addressSet(sent), addressSet(c.addressFacts(before))) {
		c.reread.addressesChanged()
	}
}

// sendAddresses sends the machine's addresses, and returns them.
func (c *connection) sendAddresses(ctx context.Context) *specs.MachineAddressesSpec {
	addrs := c.addressFacts(c.addresses)

	c.send(ctx, machineFacts{addresses: addrs})

	return addrs
}

// addressFacts are the address facts of addresses, what the session keeps of its machine's.
func (c *connection) addressFacts(addresses sessionAddresses) *specs.MachineAddressesSpec {
	addrs := addressFacts(addresses.statuses(), c.ip)
	addrs.Nodename = c.node
	addrs.ExcludedPrefixes = c.excluded

	return addrs
}

// conditionChanged probes the machine of a Node that turned NotReady, forgets the stage of one that is
// Ready again, and reads PlatformMetadata again while the Node waits for a providerID.
func (c *connection) conditionChanged(ctx context.Context) error {
	c.scheduleReread()

	notReady := c.condition.notReady.Load()

	switch {
	case !c.probes.want(notReady):
		return nil
	case notReady:
		return c.probeMachine(ctx)
	default:
		return c.readyAgain(ctx)
	}
}

// readyAgain forgets the stage of a machine whose Node is Ready again: only probes read it, and a stage
// of the Node's NotReady time ("rebooting") would stay on for ever. It costs no Talos call, unless the last
// probe found the machine not answering: one more probe then says whether it answers again.
func (c *connection) readyAgain(ctx context.Context) error {
	if !c.status.reachable {
		return c.probeMachine(ctx)
	}

	if c.status.stage == "" {
		return nil
	}

	c.status.stage = ""
	c.send(ctx, machineFacts{status: c.statusFacts()})

	return nil
}

// probeMachine asks the machine for its stage, identity and platform facts, and schedules the next probe.
// A machine that does not answer is reported unreachable, but the session goes on: its watch resumes by
// itself when it answers again. A machine that answers as another node ends the session.
func (c *connection) probeMachine(ctx context.Context) error {
	defer c.probes.probed()

	stage, err := c.readStage(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}

		if c.status.reachable {
			c.status.reachable = false
			c.status.lastError = err.Error()
			c.send(ctx, machineFacts{status: c.statusFacts()})
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

	c.status = machineStatus{reachable: true, stage: stage, uuid: refreshed.GetUuid(), lastSeen: time.Now().UnixNano()}
	c.providerIDToCome = providerIDToCome(refreshed)

	// Another machine at the address (a new UUID), or the same one rebooted into new platform facts, is
	// written; the same facts again write nothing.
	c.send(ctx, machineFacts{platform: refreshed, status: c.statusFacts()})
	c.scheduleReread()

	return nil
}

// scheduleReread keeps a read of PlatformMetadata due within PlatformRefresh while the Node waits for a
// providerID that its machine's platform has not reported yet, and cancels it once the Node waits for
// nothing from it (a read for a changed address set stays due).
func (c *connection) scheduleReread() {
	if c.condition.uninitialized.Load() && c.providerIDToCome {
		c.reread.within(jitter(c.opts.PlatformRefresh))

		return
	}

	c.reread.cancelWaiting()
}

// rereadPlatform reads the machine's PlatformMetadata again, once the machine said it is still the
// session's Node, and sends its facts, which the controller merges into those it stored (and writes only if
// they changed). A machine that does not answer ends the session, whose next start reads it again.
func (c *connection) rereadPlatform(ctx context.Context) error {
	c.reread.fired()

	if err := c.readIdentity(ctx); err != nil {
		return err
	}

	pm, err := c.readPlatformMetadata(ctx)
	if err != nil {
		return err
	}

	read := platformFacts(pm, nil, c.ip)
	c.providerIDToCome = providerIDToCome(read)

	c.send(ctx, machineFacts{platformMetadata: read})
	c.scheduleReread()

	return nil
}

// send hands a fact of the session's machine to the controller.
func (s *machineSession) send(ctx context.Context, f machineFacts) {
	f.machineRef = s.machineRef

	s.deliver(ctx, f)
}

// machineStatus is what a session knows of its machine's status: a few words of its connection rather than
// the MachineStatusSpec it sends, a message of its own with its timestamp's.
type machineStatus struct {
	reachable bool
	// stage is read only while the Node is NotReady (see probeMachine).
	stage, lastError, uuid string
	// lastSeen is when the machine last answered, in Unix nanoseconds: a time.Time's 24 bytes would take the
	// connection to the next size up.
	lastSeen int64
}

// statusFacts returns the machine's status as its facts say it.
func (c *connection) statusFacts() *specs.MachineStatusSpec {
	return &specs.MachineStatusSpec{
		Reachable:    c.status.reachable,
		LastError:    c.status.lastError,
		NodeIp:       c.ip,
		Stage:        c.status.stage,
		MachineUuid:  c.status.uuid,
		LastSeen:     timestamppb.New(time.Unix(0, c.status.lastSeen)),
		Nodename:     c.node,
		NodenameRead: true,
	}
}

func errorText(err error) string {
	if err == nil || errors.Is(err, context.Canceled) {
		return "session ended"
	}

	return err.Error()
}

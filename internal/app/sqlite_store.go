package app

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// sqliteStore persists the decision namespaces, which live in memory, to the sqlite database: it is the
// backing store of their in-memory states (inmem.BackingStore), as Talos keeps its persisted resources.
//
//   - Controllers read, write and watch the decisions at the speed of memory; none waits for the disk.
//   - Writes reach the database behind the controllers' backs, one writer at a time, a delay after the
//     decision first changed (flushDelay for IP allocations, nodeWriteDelay, csrWriteDelay) plus the
//     time to write what came before: the changes to one decision in that time (created, then a
//     finalizer, then an update) are one write of its latest version, and a decision made and dropped
//     within it is never written, nor is a decision that a request waits (unwritten). Close writes what
//     is left.
//   - A crash (SIGKILL, OOM) loses at most the changes of that time, which are decisions rebuilt
//     from Kubernetes and Talos: allocators take the pod CIDRs and LoadBalancer IPs found on Nodes and
//     Services as facts.
//   - A write that fails stays pending and is tried again; state_pending_writes and state_writes_total
//     show it.
//
// The database holds the decisions with versions of its own: a version is never compared across restarts.
type sqliteStore struct {
	db     state.CoreState
	logger *zap.Logger
	ready  chan struct{}
	stop   chan struct{}
	done   chan struct{}

	// loaded are the database's contents at start, by namespace, handed to the in-memory states once.
	loaded map[resource.Namespace][]typedResource

	// delay is how long a change to a decision (nil: destroyed) of a namespace waits before it is written.
	delay func(resource.Namespace, resource.Resource) time.Duration

	// kinds numbers the namespaces and types of the decisions and their owners (see kindTable).
	kinds kindTable

	mu      sync.Mutex
	pending map[resourceKey]pendingWrite
	// peak is the most changes pending since the map was last made: a Go map keeps the room of its largest
	// size, and thousands of Nodes joining leave thousands of changes pending for a while (see flush).
	peak int

	// flushMu makes one writer at a time; stored is the database's row of each decision as the writer
	// left it, and is only used under flushMu.
	flushMu sync.Mutex
	stored  map[resourceKey]storedRow
}

// resourceKey names a decision: its namespace and type as their number in kinds (a few of them for
// thousands of decisions), and its ID.
type resourceKey struct {
	kind uint32
	id   resource.ID
}

func (s *sqliteStore) keyOf(ptr resource.Pointer) resourceKey {
	return resourceKey{kind: s.kinds.number(ptr.Namespace(), ptr.Type()), id: ptr.ID()}
}

// pendingWrite is the latest version of a decision not written yet (nil: destroyed), when it first
// changed since it was last written, and, computed when it is queued (a pass reads every pending change),
// when it is due and whether this version is not written (see scheduled).
type pendingWrite struct {
	res       resource.Resource
	since     time.Time
	due       time.Time
	unwritten bool
}

type typedResource struct {
	res resource.Resource
	typ resource.Type
}

// storedRow is what the writer needs to know of a row to replace or remove it: its version and owner
// (checked by the database; the owner as its number in kinds), and whether it has finalizers (the database
// removes a row only without). It is kept for every decision in the database, so it is kept small.
type storedRow struct {
	version       uint64
	owner         uint32
	hasFinalizers bool
}

func (s *sqliteStore) rowOf(md *resource.Metadata) storedRow {
	return storedRow{owner: s.kinds.number("", md.Owner()), version: md.Version().Value(), hasFinalizers: !md.Finalizers().Empty()}
}

// kindTable numbers the few distinct namespaces, types and owners of the decisions, so that the writer's
// maps hold a number where each of thousands of entries would hold two or three strings. It is safe for
// concurrent use.
type kindTable struct {
	mu      sync.Mutex
	numbers map[[2]string]uint32
	names   [][2]string
}

// number returns the number of a namespace and a type (an owner: with an empty namespace).
func (k *kindTable) number(ns resource.Namespace, typ resource.Type) uint32 {
	k.mu.Lock()
	defer k.mu.Unlock()

	name := [2]string{ns, typ}

	n, ok := k.numbers[name]
	if !ok {
		if k.numbers == nil {
			k.numbers = map[[2]string]uint32{}
		}

		n = uint32(len(k.names)) //nolint:gosec // A few namespaces, types and owners: never near 2^32.
		k.numbers[name] = n
		k.names = append(k.names, name)
	}

	return n
}

// name returns the namespace and type (an owner: the type) numbered n.
func (k *kindTable) name(n uint32) (resource.Namespace, resource.Type) {
	k.mu.Lock()
	defer k.mu.Unlock()

	return k.names[n][0], k.names[n][1]
}

const (
	// flushDelay is how long the changes to an IP allocation gather before they are written, and how long
	// a pass waits after a change: the allocations are what a restart must find (an allocation applied
	// to no Node yet is known only here), and are written within it.
	flushDelay = 250 * time.Millisecond
	// csrWriteDelay is flushDelay for CSR decisions: most requests are approved, and their decisions
	// dropped with them, within seconds; a decision that lasts longer is written. Writing is most of what
	// the database costs (with every decision written within 250 ms, 14% of talos-ccm's CPU while 5,000
	// nodes joined).
	csrWriteDelay = 10 * time.Second
	// nodeWriteDelay is flushDelay for the decisions about Nodes, which are computed again from Kubernetes
	// and Talos after a restart: while thousands of Nodes join, each changes every few seconds for a while
	// (its facts, its Node initialized, its finalizers), and is written once or twice instead of each time.
	// While 5,000 Nodes join, a Node's decisions keep changing for longer than 10 s (its machine's facts
	// come first, its Node's initialization up to a minute later): 30 s took the database's writes from 5.7
	// to 4.8 per Node, each rewrite a transaction of its own.
	nodeWriteDelay = 30 * time.Second
	// flushRetry is how long a failed write waits before it is tried again.
	flushRetry = time.Second
	// shrinkPendingAt is the most changes pending from which the map of those left is made again once most
	// are written: below it, the map's room is a few kilobytes.
	shrinkPendingAt = 256
	// unwritten is the delay of a change that is not written: the decision about a request that waits. A
	// restart decides it again from what it waits for (the request, its Node and machine), and every
	// kubelet's first request waits for its Node's initialization, up to minutes while thousands of Nodes
	// join: written, each was a row created, rewritten as its reason changed, and deleted (at 5,000 Nodes,
	// the writes per Node fell from 6.9 to 4.9, the first figure also counting the removals of decisions
	// that had no row). Only a decision that has a row already is written (after csrWriteDelay): the row
	// would otherwise keep an older verdict.
	unwritten time.Duration = -1
)

// newSQLiteStore reads every decision of kinds from the database, and starts the writer.
func newSQLiteStore(ctx context.Context, db state.CoreState, kinds []resource.Kind, logger *zap.Logger) (*sqliteStore, error) {
	s := &sqliteStore{
		db:      db,
		logger:  logger,
		ready:   make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
		loaded:  map[resource.Namespace][]typedResource{},
		delay:   writeDelay,
		pending: map[resourceKey]pendingWrite{},
		stored:  map[resourceKey]storedRow{},
	}

	for _, kind := range kinds {
		list, err := db.List(ctx, kind)
		if err != nil {
			return nil, fmt.Errorf("failed to read %s from the state database: %w", kind.Type(), err)
		}

		for _, res := range list.Items {
			md := res.Metadata()
			s.stored[s.keyOf(md)] = s.rowOf(md)
			s.loaded[md.Namespace()] = append(s.loaded[md.Namespace()], typedResource{res: res, typ: md.Type()})
		}
	}

	// The writer outlives the caller's context: Close stops it once the controllers are stopped, and a
	// write is never interrupted.
	go s.run(context.WithoutCancel(ctx))

	return s, nil
}

// namespace returns the backing store of one namespace's in-memory state.
func (s *sqliteStore) namespace(ns resource.Namespace) inmem.BackingStore {
	return namespaceStore{store: s, ns: ns}
}

// writeDelay is the delay of a change to a decision of a namespace (res nil: destroyed). The decision that
// a request is superseded is written at once: it is what keeps the request from being approved after a
// restart once its superseder is approved and gone. The decision that a request waits is not written
// (unwritten).
func writeDelay(ns resource.Namespace, res resource.Resource) time.Duration {
	switch ns {
	case csr.NamespaceName:
		d, ok := res.(*csr.CSRDecision)

		switch {
		case ok && d.TypedSpec().Value.GetSupersededBy() != "":
			return flushDelay
		case ok && d.TypedSpec().Value.GetVerdict() == csr.VerdictWait:
			return unwritten
		}

		return csrWriteDelay
	case node.NamespaceName:
		return nodeWriteDelay
	default:
		return flushDelay
	}
}

// Close stops the writer and writes what is pending, whatever its delay.
func (s *sqliteStore) Close() error {
	close(s.stop)
	<-s.done

	_, err := s.flush(context.Background(), time.Time{})

	return err
}

// run writes the pending changes in passes: a pass runs flushDelay after a change (the changes within that
// time gather), and writes every change that is due then (see scheduled); while changes wait, a pass runs when
// the next one comes due, flushDelay after the last pass at the earliest.
func (s *sqliteStore) run(ctx context.Context) {
	defer close(s.done)

	var (
		wake   <-chan time.Time
		wakeAt time.Time
	)

	schedule := func(at time.Time) {
		if wake == nil || at.Before(wakeAt) {
			wake, wakeAt = time.After(time.Until(at)), at
		}
	}

	for {
		select {
		case <-s.stop:
			return
		case <-s.ready:
			schedule(time.Now().Add(flushDelay))

			continue
		case <-wake:
			wake = nil
		}

		next, err := s.flush(ctx, time.Now())
		if err != nil {
			s.logger.Warn("failed to write decisions to the state database, retrying", zap.Error(err))

			next = time.Now().Add(flushRetry)
		}

		if !next.IsZero() {
			schedule(later(next, time.Now().Add(flushDelay)))
		}
	}
}

func (s *sqliteStore) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *sqliteStore) queue(key resourceKey, ns resource.Namespace, res resource.Resource) {
	s.mu.Lock()

	p, queued := s.pending[key]
	if !queued {
		p.since = time.Now()
	}

	p.res = res
	s.pending[key] = s.scheduled(ns, p)
	s.peak = max(s.peak, len(s.pending))
	metrics.StatePendingWrites.Set(float64(len(s.pending)))
	s.mu.Unlock()

	s.signal()
}

// scheduled sets when a pending change of a decision of namespace ns is written at the next pass (due): its
// delay after the decision first changed, less flushDelay, the most a pass waits after a change. An IP
// allocation is written by the next pass, within flushDelay; a decision about a Node by the first pass
// nodeWriteDelay-flushDelay after it. A version that is not written (unwritten) is pending only until the
// next pass drops it (nothingToWrite), unless it replaces a row that says otherwise, csrWriteDelay after.
func (s *sqliteStore) scheduled(ns resource.Namespace, p pendingWrite) pendingWrite {
	delay := s.delay(ns, p.res)

	p.unwritten = p.res != nil && delay == unwritten
	if p.unwritten {
		delay = csrWriteDelay
	}

	p.due = p.since.Add(delay - flushDelay)

	return p
}

// nothingToWrite says whether a pending change leaves the database as it is: the decision has no row, and
// it is destroyed or its version is not written. Called under flushMu, which guards stored.
func (s *sqliteStore) nothingToWrite(key resourceKey, p pendingWrite) bool {
	if _, exists := s.stored[key]; exists {
		return false
	}

	return p.res == nil || p.unwritten
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}

	return b
}

// flush writes the pending changes due at now (every one, with a zero now); a change that fails stays
// pending unless a newer one replaced it. It returns when the next pending change comes due (zero: none).
func (s *sqliteStore) flush(ctx context.Context, now time.Time) (time.Time, error) {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()

	s.mu.Lock()

	batch := map[resourceKey]pendingWrite{}

	for key, p := range s.pending {
		switch {
		case s.nothingToWrite(key, p):
			delete(s.pending, key)
		case now.IsZero() || !now.Before(p.due):
			batch[key] = p
			delete(s.pending, key)
		}
	}

	s.mu.Unlock()

	var errs []error

	failed := map[resourceKey]pendingWrite{}

	for key, p := range batch {
		_, typ := s.kinds.name(key.kind)

		if err := s.write(ctx, key, p.res); err != nil {
			metrics.StateWrites.WithLabelValues(typ, "error").Inc()

			errs = append(errs, err)
			failed[key] = p

			continue
		}

		metrics.StateWrites.WithLabelValues(typ, "ok").Inc()
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	for key, p := range failed {
		if newer, ok := s.pending[key]; ok {
			// The newer version is written instead, as soon as the failed one would have been.
			ns, _ := s.kinds.name(key.kind)
			newer.since = p.since
			s.pending[key] = s.scheduled(ns, newer)
		} else {
			s.pending[key] = p
		}
	}

	metrics.StatePendingWrites.Set(float64(len(s.pending)))

	// The changes left pending move to a map of their size once they are a quarter of the most there were:
	// the room of thousands of changes written is given back instead of kept for ever (maps.Clone would
	// keep it too).
	if s.peak >= shrinkPendingAt && len(s.pending) <= s.peak/4 {
		left := make(map[resourceKey]pendingWrite, len(s.pending))
		for key, p := range s.pending {
			left[key] = p
		}

		s.pending, s.peak = left, len(left)
	}

	var next time.Time

	for _, p := range s.pending {
		if next.IsZero() || p.due.Before(next) {
			next = p.due
		}
	}

	return next, errors.Join(errs...)
}

// write makes the database's row of key the resource res (nil: no row).
func (s *sqliteStore) write(ctx context.Context, key resourceKey, res resource.Resource) error {
	row, exists := s.stored[key]

	if res == nil {
		if !exists {
			return nil
		}

		if err := s.remove(ctx, key, row); err != nil {
			return err
		}

		delete(s.stored, key)

		return nil
	}

	written := res.DeepCopy()

	var err error

	if exists {
		_, owner := s.kinds.name(row.owner)

		written.Metadata().SetVersion(versionOf(row.version))
		err = s.db.Update(ctx, written, state.WithUpdateOwner(owner), state.WithExpectedPhaseAny())
	} else {
		err = s.db.Create(ctx, written, state.WithCreateOwner(written.Metadata().Owner()))
	}

	if err != nil {
		return fmt.Errorf("failed to write %s: %w", written.Metadata(), err)
	}

	s.stored[key] = s.rowOf(written.Metadata())

	return nil
}

// remove deletes a row; the database refuses to delete a row with finalizers, which the in-memory
// resource had lost before it was destroyed, so they are removed first.
func (s *sqliteStore) remove(ctx context.Context, key resourceKey, row storedRow) error {
	ns, typ := s.kinds.name(key.kind)
	_, owner := s.kinds.name(row.owner)
	ptr := resource.NewMetadata(ns, typ, key.id, resource.VersionUndefined)

	if row.hasFinalizers {
		current, err := s.db.Get(ctx, ptr)
		if err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to read %s: %w", ptr, err)
		}

		if current != nil {
			*current.Metadata().Finalizers() = nil

			if err = s.db.Update(ctx, current, state.WithUpdateOwner(owner), state.WithExpectedPhaseAny()); err != nil {
				return fmt.Errorf("failed to clear the finalizers of %s: %w", ptr, err)
			}
		}
	}

	if err := s.db.Destroy(ctx, ptr, state.WithDestroyOwner(owner)); err != nil && !state.IsNotFoundError(err) {
		return fmt.Errorf("failed to delete %s: %w", ptr, err)
	}

	return nil
}

// namespaceStore is the backing store of one namespace.
type namespaceStore struct {
	store *sqliteStore
	ns    resource.Namespace
}

// Load hands the namespace's decisions read at start to its in-memory state (once).
func (n namespaceStore) Load(_ context.Context, handler inmem.LoadHandler) error {
	n.store.mu.Lock()
	loaded := n.store.loaded[n.ns]
	delete(n.store.loaded, n.ns)
	n.store.mu.Unlock()

	for _, item := range loaded {
		if err := handler(item.typ, item.res); err != nil {
			return err
		}
	}

	return nil
}

// Put queues the write of a resource, which the in-memory state never changes once stored.
func (n namespaceStore) Put(_ context.Context, _ resource.Type, res resource.Resource) error {
	n.store.queue(n.store.keyOf(res.Metadata()), n.ns, res)

	return nil
}

// Destroy queues the removal of a resource.
func (n namespaceStore) Destroy(_ context.Context, _ resource.Type, ptr resource.Pointer) error {
	n.store.queue(n.store.keyOf(ptr), n.ns, nil)

	return nil
}

// versionOf is the resource version numbered v.
func versionOf(v uint64) resource.Version {
	version, err := resource.ParseVersion(strconv.FormatUint(v, 10))
	if err != nil {
		panic(err) // a number always parses
	}

	return version
}

package app

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// sqliteStore persists the decision namespaces, which live in memory, to the sqlite database: it is the
// backing store of their in-memory states (inmem.BackingStore), as Talos keeps its persisted resources.
//
//   - Controllers read, write and watch the decisions at the speed of memory; none waits for the disk.
//   - Writes reach the database behind the controllers' backs, one writer at a time, at most flushDelay
//     after the change plus the time to write what came before: the changes to one decision in that time
//     (created, then a finalizer, then an update) are one write of its latest version. Close writes what
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

	mu      sync.Mutex
	pending map[resourceKey]resource.Resource // nil: destroyed

	// flushMu makes one writer at a time; stored is the database's row of each decision as the writer
	// left it, and is only used under flushMu.
	flushMu sync.Mutex
	stored  map[resourceKey]storedRow
}

type resourceKey struct {
	namespace resource.Namespace
	typ       resource.Type
	id        resource.ID
}

func keyOf(ptr resource.Pointer) resourceKey {
	return resourceKey{namespace: ptr.Namespace(), typ: ptr.Type(), id: ptr.ID()}
}

type typedResource struct {
	res resource.Resource
	typ resource.Type
}

// storedRow is what the writer needs to know of a row to replace or remove it: its version and owner
// (checked by the database), and whether it has finalizers (the database removes a row only without).
type storedRow struct {
	owner         string
	version       resource.Version
	hasFinalizers bool
}

func rowOf(md *resource.Metadata) storedRow {
	return storedRow{owner: md.Owner(), version: md.Version(), hasFinalizers: !md.Finalizers().Empty()}
}

const (
	// flushDelay is how long changes gather before they are written: while thousands of nodes join, a
	// decision changes several times within it (facts arrive one by one, finalizers come and go) and is
	// written once, and a CSR decision made and dropped within it is never written. Writing is most of what
	// the database costs: at 250 ms, 14% of talos-ccm's CPU while 5,000 nodes joined.
	flushDelay = time.Second
	// flushRetry is how long a failed write waits before it is tried again.
	flushRetry = time.Second
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
		pending: map[resourceKey]resource.Resource{},
		stored:  map[resourceKey]storedRow{},
	}

	for _, kind := range kinds {
		list, err := db.List(ctx, kind)
		if err != nil {
			return nil, fmt.Errorf("failed to read %s from the state database: %w", kind.Type(), err)
		}

		for _, res := range list.Items {
			md := res.Metadata()
			s.stored[keyOf(md)] = rowOf(md)
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

// Close stops the writer and writes what is pending.
func (s *sqliteStore) Close() error {
	close(s.stop)
	<-s.done

	return s.flush(context.Background())
}

func (s *sqliteStore) run(ctx context.Context) {
	defer close(s.done)

	for {
		select {
		case <-s.stop:
			return
		case <-s.ready:
		}

		select {
		case <-s.stop:
			return
		case <-time.After(flushDelay):
		}

		if err := s.flush(ctx); err != nil {
			s.logger.Warn("failed to write decisions to the state database, retrying", zap.Error(err))

			select {
			case <-s.stop:
				return
			case <-time.After(flushRetry):
			}

			s.signal()
		}
	}
}

func (s *sqliteStore) signal() {
	select {
	case s.ready <- struct{}{}:
	default:
	}
}

func (s *sqliteStore) queue(key resourceKey, res resource.Resource) {
	s.mu.Lock()
	s.pending[key] = res
	metrics.StatePendingWrites.Set(float64(len(s.pending)))
	s.mu.Unlock()

	s.signal()
}

// flush writes every pending change; a change that fails stays pending unless a newer one replaced it.
func (s *sqliteStore) flush(ctx context.Context) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()

	s.mu.Lock()
	batch := s.pending
	s.pending = map[resourceKey]resource.Resource{}
	s.mu.Unlock()

	var errs []error

	failed := map[resourceKey]resource.Resource{}

	for key, res := range batch {
		if err := s.write(ctx, key, res); err != nil {
			metrics.StateWrites.WithLabelValues("error").Inc()

			errs = append(errs, err)
			failed[key] = res

			continue
		}

		metrics.StateWrites.WithLabelValues("ok").Inc()
	}

	s.mu.Lock()

	for key, res := range failed {
		if _, newer := s.pending[key]; !newer {
			s.pending[key] = res
		}
	}

	metrics.StatePendingWrites.Set(float64(len(s.pending)))
	s.mu.Unlock()

	return errors.Join(errs...)
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
		written.Metadata().SetVersion(row.version)
		err = s.db.Update(ctx, written, state.WithUpdateOwner(row.owner), state.WithExpectedPhaseAny())
	} else {
		err = s.db.Create(ctx, written, state.WithCreateOwner(written.Metadata().Owner()))
	}

	if err != nil {
		return fmt.Errorf("failed to write %s: %w", written.Metadata(), err)
	}

	s.stored[key] = rowOf(written.Metadata())

	return nil
}

// remove deletes a row; the database refuses to delete a row with finalizers, which the in-memory
// resource had lost before it was destroyed, so they are removed first.
func (s *sqliteStore) remove(ctx context.Context, key resourceKey, row storedRow) error {
	ptr := resource.NewMetadata(key.namespace, key.typ, key.id, resource.VersionUndefined)

	if row.hasFinalizers {
		current, err := s.db.Get(ctx, ptr)
		if err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to read %s: %w", ptr, err)
		}

		if current != nil {
			*current.Metadata().Finalizers() = nil

			if err = s.db.Update(ctx, current, state.WithUpdateOwner(row.owner), state.WithExpectedPhaseAny()); err != nil {
				return fmt.Errorf("failed to clear the finalizers of %s: %w", ptr, err)
			}
		}
	}

	if err := s.db.Destroy(ctx, ptr, state.WithDestroyOwner(row.owner)); err != nil && !state.IsNotFoundError(err) {
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
	n.store.queue(keyOf(res.Metadata()), res)

	return nil
}

// Destroy queues the removal of a resource.
func (n namespaceStore) Destroy(_ context.Context, _ resource.Type, ptr resource.Pointer) error {
	n.store.queue(keyOf(ptr), nil)

	return nil
}

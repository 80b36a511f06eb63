package cosistate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
)

// ReleasableNamespaces is a state split by namespace, as namespaced.State is (each namespace is the state
// the builder builds for it, on first use), whose namespaces can be released: a released namespace is
// dropped, with everything its state holds, once nothing is stored in it and nobody watches it.
//
// namespaced.State keeps every namespace it ever built, and an in-memory namespace keeps, beside its
// resources, a collection of every type ever used in it (the COSI runtime's with the history of that
// type's last events, the resources destroyed last among them): a host that runs and removes clusters would
// hold the empty namespaces of every cluster it ever ran. Dropping an empty namespace that nobody watches
// changes nothing anyone can see: used again, it is built afresh, empty, as it was. Only a watch started
// from a bookmark of the dropped namespace's history fails, as one started from a bookmark the history no
// longer holds.
type ReleasableNamespaces struct {
	builder    namespaced.StateBuilder
	namespaces sync.Map // resource.Namespace -> *releasableNamespace
}

// releasableNamespace is one namespace of a ReleasableNamespaces.
type releasableNamespace struct {
	core state.CoreState

	// mu is held shared by every call on core, and exclusively to drop the namespace: a call never reaches
	// a dropped namespace (it builds the namespace afresh), and the namespace is never dropped during one.
	mu      sync.RWMutex
	dropped bool

	// watches counts the watches open on core; released says that the namespace goes once it is empty and
	// its last watch ended.
	watches  atomic.Int64
	released atomic.Bool

	// types are the types a resource was created of: the only ones the namespace can hold outside of its
	// backing store (whose resources a namespace built afresh loads again).
	typesMu sync.Mutex
	types   map[resource.Type]struct{}
}

var _ state.CoreState = (*ReleasableNamespaces)(nil)

// NewReleasableNamespaces returns a state whose namespace ns is builder(ns), as namespaced.NewState does,
// whose namespaces can be released (ReleaseNamespaces).
func NewReleasableNamespaces(builder namespaced.StateBuilder) *ReleasableNamespaces {
	return &ReleasableNamespaces{builder: builder}
}

// ReleaseNamespaces drops the given namespaces once nothing is stored in them and nobody watches them:
// at once if they are so already, otherwise when their last watch ends and they are empty then. A
// namespace written again before it is dropped keeps what was written; dropping it then waits for it to
// be emptied and unwatched again. The error is that of reading whether a namespace is empty.
func (st *ReleasableNamespaces) ReleaseNamespaces(ctx context.Context, namespaces []resource.Namespace) error {
	var errs []error

	for _, ns := range namespaces {
		v, ok := st.namespaces.Load(ns)
		if !ok {
			continue
		}

		n := v.(*releasableNamespace) //nolint:forcetypeassert // Only those are stored.
		n.released.Store(true)

		if err := st.drop(ctx, ns, n); err != nil {
			errs = append(errs, err)
		}
	}

	return errors.Join(errs...)
}

// drop drops the namespace ns, whose state is n, if it was released, is not watched and holds nothing.
func (st *ReleasableNamespaces) drop(ctx context.Context, ns resource.Namespace, n *releasableNamespace) error {
	n.mu.Lock()
	defer n.mu.Unlock()

	if n.dropped || !n.released.Load() || n.watches.Load() > 0 {
		return nil
	}

	n.typesMu.Lock()
	defer n.typesMu.Unlock()

	for typ := range n.types {
		list, err := n.core.List(ctx, resource.NewMetadata(ns, typ, "", resource.VersionUndefined))
		if err != nil {
			return fmt.Errorf("failed to list %s in the released namespace %s: %w", typ, ns, err)
		}

		if len(list.Items) > 0 {
			return nil
		}
	}

	n.dropped = true
	st.namespaces.CompareAndDelete(ns, n)

	return nil
}

// acquire returns the state of the namespace ns, built if need be, held shared: the caller releases it
// (n.mu.RUnlock) once its call on n.core returned.
func (st *ReleasableNamespaces) acquire(ns resource.Namespace) *releasableNamespace {
	for {
		if n, ok := st.existing(ns); ok {
			return n
		}

		st.namespaces.LoadOrStore(ns, &releasableNamespace{core: st.builder(ns)})
	}
}

// existing returns the state of the namespace ns, held shared as acquire's, if it has one.
func (st *ReleasableNamespaces) existing(ns resource.Namespace) (*releasableNamespace, bool) {
	v, ok := st.namespaces.Load(ns)
	if !ok {
		return nil, false
	}

	n := v.(*releasableNamespace) //nolint:forcetypeassert // Only those are stored.

	n.mu.RLock()

	if n.dropped {
		// Dropped since it was loaded.
		n.mu.RUnlock()

		return nil, false
	}

	return n, true
}

// read reads from the namespace ns: from its state if it has one, otherwise from a state built for the
// read, kept only if the read found something (what a backing store holds), so that looking into a
// namespace that was dropped does not build it again.
func read[T any](st *ReleasableNamespaces, ns resource.Namespace, read func(state.CoreState) (T, error), found func(T, error) bool) (T, error) {
	if n, ok := st.existing(ns); ok {
		defer n.mu.RUnlock()

		return read(n.core)
	}

	core := st.builder(ns)

	out, err := read(core)
	if found(out, err) {
		st.namespaces.LoadOrStore(ns, &releasableNamespace{core: core})
	}

	return out, err
}

// created records that a resource of typ may be stored in the namespace.
func (n *releasableNamespace) created(typ resource.Type) {
	n.typesMu.Lock()
	defer n.typesMu.Unlock()

	if n.types == nil {
		n.types = map[resource.Type]struct{}{}
	}

	n.types[typ] = struct{}{}
}

// watch starts a watch on the namespace ns and counts it until ctx ends; the last watch of a released
// namespace to end drops it if it is empty.
func (st *ReleasableNamespaces) watch(ctx context.Context, ns resource.Namespace, start func(state.CoreState) error) error {
	n := st.acquire(ns)
	defer n.mu.RUnlock()

	if err := start(n.core); err != nil {
		return err
	}

	n.watches.Add(1)

	context.AfterFunc(ctx, func() {
		if n.watches.Add(-1) == 0 && n.released.Load() {
			// Nobody waits for this drop: a namespace that cannot be read stays, as if it were not empty.
			st.drop(context.Background(), ns, n) //nolint:errcheck
		}
	})

	return nil
}

// Get implements state.CoreState.
func (st *ReleasableNamespaces) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) { //nolint:ireturn
	return read(st, ptr.Namespace(), func(core state.CoreState) (resource.Resource, error) {
		return core.Get(ctx, ptr, opts...) //nolint:wrapcheck // The namespace's own error.
	}, func(_ resource.Resource, err error) bool { return err == nil })
}

// List implements state.CoreState.
func (st *ReleasableNamespaces) List(ctx context.Context, kind resource.Kind, opts ...state.ListOption) (resource.List, error) {
	return read(st, kind.Namespace(), func(core state.CoreState) (resource.List, error) {
		return core.List(ctx, kind, opts...) //nolint:wrapcheck // The namespace's own error.
	}, func(list resource.List, err error) bool { return err == nil && len(list.Items) > 0 })
}

// Create implements state.CoreState.
func (st *ReleasableNamespaces) Create(ctx context.Context, res resource.Resource, opts ...state.CreateOption) error {
	n := st.acquire(res.Metadata().Namespace())
	defer n.mu.RUnlock()

	n.created(res.Metadata().Type())

	return n.core.Create(ctx, res, opts...) //nolint:wrapcheck // The namespace's own error.
}

// Update implements state.CoreState.
func (st *ReleasableNamespaces) Update(ctx context.Context, res resource.Resource, opts ...state.UpdateOption) error {
	n := st.acquire(res.Metadata().Namespace())
	defer n.mu.RUnlock()

	return n.core.Update(ctx, res, opts...) //nolint:wrapcheck // The namespace's own error.
}

// Destroy implements state.CoreState.
func (st *ReleasableNamespaces) Destroy(ctx context.Context, ptr resource.Pointer, opts ...state.DestroyOption) error {
	n := st.acquire(ptr.Namespace())
	defer n.mu.RUnlock()

	return n.core.Destroy(ctx, ptr, opts...) //nolint:wrapcheck // The namespace's own error.
}

// Watch implements state.CoreState.
func (st *ReleasableNamespaces) Watch(ctx context.Context, ptr resource.Pointer, ch chan<- state.Event, opts ...state.WatchOption) error {
	return st.watch(ctx, ptr.Namespace(), func(core state.CoreState) error { return core.Watch(ctx, ptr, ch, opts...) })
}

// WatchKind implements state.CoreState.
func (st *ReleasableNamespaces) WatchKind(ctx context.Context, kind resource.Kind, ch chan<- state.Event, opts ...state.WatchKindOption) error {
	return st.watch(ctx, kind.Namespace(), func(core state.CoreState) error { return core.WatchKind(ctx, kind, ch, opts...) })
}

// WatchKindAggregated implements state.CoreState.
func (st *ReleasableNamespaces) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	return st.watch(ctx, kind.Namespace(), func(core state.CoreState) error { return core.WatchKindAggregated(ctx, kind, ch, opts...) })
}

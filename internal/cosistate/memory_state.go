package cosistate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
)

// MemoryStateBuilder returns a builder of in-memory namespaces (for namespaced.NewState): what a host's
// state builder should give the namespaces of PrefixedNamespaces, with inmem.WithBackingStore as extra for
// the persisted ones (the other options of the COSI runtime's in-memory state, its history's, mean nothing
// here).
//
// A namespace stores each type in a map of its own, hands out the stored resources on reads and in events
// instead of copies (see memoryCollection: what is read must not be changed), and its watches keep no
// goroutine while idle and never fall behind (see memoryWatch and eventQueue). It keeps no history:
// watches from a bookmark or with tail events are refused.
func MemoryStateBuilder(extra ...inmem.StateOption) namespaced.StateBuilder {
	var options inmem.StateOptions

	for _, opt := range extra {
		opt(&options)
	}

	return func(ns resource.Namespace) state.CoreState {
		return &memoryState{ns: ns, backing: options.BackingStore}
	}
}

// NewMemoryState returns an empty in-memory state for one cluster's pipeline (MemoryStateBuilder).
func NewMemoryState() state.State {
	return state.WrapCore(namespaced.NewState(MemoryStateBuilder()))
}

// memoryState is one namespace of MemoryStateBuilder's.
type memoryState struct {
	ns resource.Namespace
	// backing is the host's backing store, or nil: loaded at the first call, then told of every write.
	backing inmem.BackingStore
	loadMu  sync.Mutex
	loaded  atomic.Bool

	collections sync.Map // resource.Type -> *memoryCollection
}

var _ state.CoreState = (*memoryState)(nil)

// errNoHistory is the error of a watch that asks for past events: the in-memory namespaces keep none.
var errNoHistory = errors.New("the in-memory state keeps no history of events")

// noBookmarksError is the error of a watch from a bookmark: state.IsInvalidWatchBookmarkError holds for it,
// so that a watcher that resumes from its last bookmark starts over.
type noBookmarksError struct{}

func (noBookmarksError) Error() string {
	return "invalid watch bookmark: the in-memory state keeps no history of events to resume a watch from"
}

// InvalidWatchBookmarkError implements state.ErrInvalidWatchBookmark.
func (noBookmarksError) InvalidWatchBookmarkError() {}

// collection returns the collection of typ, created if create is set (nil otherwise).
func (st *memoryState) collection(typ resource.Type, create bool) *memoryCollection {
	if c, ok := st.collections.Load(typ); ok {
		return c.(*memoryCollection) //nolint:forcetypeassert // Only those are stored.
	}

	if !create {
		return nil
	}

	c, _ := st.collections.LoadOrStore(typ, newMemoryCollection(st.ns, typ))

	return c.(*memoryCollection) //nolint:forcetypeassert // Only those are stored.
}

// load loads the backing store's resources, once: a load that failed is tried again at the next call.
func (st *memoryState) load(ctx context.Context) error {
	if st.backing == nil || st.loaded.Load() {
		return nil
	}

	st.loadMu.Lock()
	defer st.loadMu.Unlock()

	if st.loaded.Load() {
		return nil
	}

	if err := st.backing.Load(ctx, func(typ resource.Type, res resource.Resource) error {
		c := st.collection(typ, true)

		c.mu.Lock()
		c.store(res)
		c.mu.Unlock()

		return nil
	}); err != nil {
		return fmt.Errorf("failed to load the namespace %s: %w", st.ns, err)
	}

	st.loaded.Store(true)

	return nil
}

// Get implements state.CoreState: the stored resource itself, not to be changed.
func (st *memoryState) Get(ctx context.Context, ptr resource.Pointer, _ ...state.GetOption) (resource.Resource, error) { //nolint:ireturn
	if err := st.load(ctx); err != nil {
		return nil, err
	}

	c := st.collection(ptr.Type(), false)
	if c == nil {
		return nil, inmem.ErrNotFound(ptr)
	}

	return c.get(ptr.ID())
}

// List implements state.CoreState: the stored resources themselves, sorted by ID, not to be changed.
func (st *memoryState) List(ctx context.Context, kind resource.Kind, opts ...state.ListOption) (resource.List, error) {
	if err := st.load(ctx); err != nil {
		return resource.List{}, err
	}

	c := st.collection(kind.Type(), false)
	if c == nil {
		return resource.List{Items: []resource.Resource{}}, nil
	}

	var options state.ListOptions

	for _, opt := range opts {
		opt(&options)
	}

	return resource.List{Items: c.list(&options)}, nil
}

// Create implements state.CoreState.
func (st *memoryState) Create(ctx context.Context, res resource.Resource, opts ...state.CreateOption) error {
	if err := st.load(ctx); err != nil {
		return err
	}

	var options state.CreateOptions

	for _, opt := range opts {
		opt(&options)
	}

	return st.collection(res.Metadata().Type(), true).create(ctx, res, options.Owner, st.backing)
}

// Update implements state.CoreState.
func (st *memoryState) Update(ctx context.Context, res resource.Resource, opts ...state.UpdateOption) error {
	if err := st.load(ctx); err != nil {
		return err
	}

	options := state.DefaultUpdateOptions()

	for _, opt := range opts {
		opt(&options)
	}

	c := st.collection(res.Metadata().Type(), false)
	if c == nil {
		return inmem.ErrNotFound(res.Metadata())
	}

	return c.update(ctx, res, &options, st.backing)
}

// Destroy implements state.CoreState.
func (st *memoryState) Destroy(ctx context.Context, ptr resource.Pointer, opts ...state.DestroyOption) error {
	if err := st.load(ctx); err != nil {
		return err
	}

	var options state.DestroyOptions

	for _, opt := range opts {
		opt(&options)
	}

	c := st.collection(ptr.Type(), false)
	if c == nil {
		return inmem.ErrNotFound(ptr)
	}

	return c.destroy(ctx, ptr, options.Owner, st.backing)
}

// Watch implements state.CoreState: the resource as it is (created, or destroyed if there is none), then
// every change of it.
func (st *memoryState) Watch(ctx context.Context, ptr resource.Pointer, ch chan<- state.Event, opts ...state.WatchOption) error {
	var options state.WatchOptions

	for _, opt := range opts {
		opt(&options)
	}

	if err := refuseHistory(options.TailEvents, options.StartFromBookmark); err != nil {
		return fmt.Errorf("failed to watch %s: %w", pointerString(ptr), err)
	}

	if err := st.load(ctx); err != nil {
		return err
	}

	w := singleWatch(ctx, ch)
	w.id = ptr.ID()

	st.collection(ptr.Type(), true).watch(w, func(c *memoryCollection) []state.Event {
		if res, ok := c.res[ptr.ID()]; ok {
			return []state.Event{{Type: state.Created, Resource: res}}
		}

		return []state.Event{{Type: state.Destroyed, Resource: resource.NewTombstone(resource.NewMetadata(st.ns, ptr.Type(), ptr.ID(), resource.VersionUndefined))}}
	})

	return nil
}

// WatchKind implements state.CoreState.
func (st *memoryState) WatchKind(ctx context.Context, kind resource.Kind, ch chan<- state.Event, opts ...state.WatchKindOption) error {
	return st.watchKind(ctx, kind, func() *memoryWatch { return singleWatch(ctx, ch) }, opts)
}

// WatchKindAggregated implements state.CoreState.
func (st *memoryState) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	return st.watchKind(ctx, kind, func() *memoryWatch { return aggregatedWatch(ctx, ch) }, opts)
}

// watchKind starts a watch of the resources of kind that the options select: their contents first, if
// asked for, then a Bootstrapped event; a bookmark (a Noop event, with no bookmark in it), if asked for;
// then every change. newWatch makes the watch once it is sure to start (it takes the redirect of a view's
// watch, see takeRedirect).
func (st *memoryState) watchKind(ctx context.Context, kind resource.Kind, newWatch func() *memoryWatch, opts []state.WatchKindOption) error {
	var options state.WatchKindOptions

	for _, opt := range opts {
		opt(&options)
	}

	if err := refuseHistory(options.TailEvents, options.StartFromBookmark); err != nil {
		return fmt.Errorf("failed to watch %s: %w", kind.Type(), err)
	}

	if err := st.load(ctx); err != nil {
		return err
	}

	w := newWatch()
	w.idQuery, w.labelQueries = options.IDQuery, options.LabelQueries
	marker := func(typ state.EventType) state.Event {
		return state.Event{Type: typ, Resource: resource.NewTombstone(resource.NewMetadata(st.ns, kind.Type(), "", resource.VersionUndefined))}
	}

	st.collection(kind.Type(), true).watch(w, func(c *memoryCollection) []state.Event {
		var start []state.Event

		if options.BootstrapContents {
			start = append(c.contents(w), marker(state.Bootstrapped))
		}

		if options.BootstrapBookmark {
			start = append(start, marker(state.Noop))
		}

		return start
	})

	return nil
}

// refuseHistory returns the error of a watch that asks for past events (tail events, or from a bookmark).
func refuseHistory(tail int, bookmark state.Bookmark) error {
	switch {
	case bookmark != nil:
		return noBookmarksError{}
	case tail > 0:
		return fmt.Errorf("%w: tail events are not supported", errNoHistory)
	default:
		return nil
	}
}

package cosistate

import (
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
)

// sharedReads is an in-memory namespace whose reads hand out the resources it stores, not copies of them.
//
// The in-memory state copies every resource it returns from Get and List, and the controller runtime reads
// through them: each reconcile of a qtransform controller reads its input, its output twice (the second
// time to copy it for the change) and what it decides from. At 5,000 joining Nodes those copies were a
// fifth of talos-ccm's allocations, and a tenth of its CPU before the garbage collector's share. A resource
// the in-memory state stores is never changed afterwards (a write stores a new copy, and the watch events
// already share the stored ones), so reads can share it too: whoever reads must not change what it got,
// and copies it first to change it (state.UpdateWithConflicts and safe.WriterModify do).
//
// The stored resources are learned from the in-memory state's backing store, which it calls with the very
// resource it is about to store, under its lock, only once the write cannot fail any more; a host's own
// backing store is called first. Until a namespace was first read (and so loaded from the host's backing
// store), and for a resource it does not hold, a read goes to the in-memory state.
type sharedReads struct {
	state.CoreState

	stored *storedIndex
	// loaded is set once a read reached the in-memory state, which loads its backing store first.
	loaded atomic.Bool
}

// Get implements state.CoreState: the stored resource itself, not to be changed. Once the namespace is
// loaded, the index holds everything it stores: a resource it lacks is not found, as the in-memory state
// would say.
func (s *sharedReads) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) { //nolint:ireturn
	if s.loaded.Load() {
		if res, ok := s.stored.get(ptr.Namespace(), ptr.Type(), ptr.ID()); ok {
			return res, nil
		}

		return nil, inmem.ErrNotFound(ptr)
	}

	res, err := s.CoreState.Get(ctx, ptr, opts...)
	if err == nil || state.IsNotFoundError(err) {
		s.loaded.Store(true)
	}

	return res, err
}

// List implements state.CoreState: the stored resources themselves, sorted by ID as the in-memory state
// sorts them, not to be changed.
func (s *sharedReads) List(ctx context.Context, kind resource.Kind, opts ...state.ListOption) (resource.List, error) {
	if !s.loaded.Load() {
		list, err := s.CoreState.List(ctx, kind, opts...)
		if err == nil {
			s.loaded.Store(true)
		}

		return list, err
	}

	var options state.ListOptions

	for _, opt := range opts {
		opt(&options)
	}

	return resource.List{Items: s.stored.list(kind.Namespace(), kind.Type(), &options)}, nil
}

// storedIndex holds the resources an in-memory state stores, by namespace, type and ID, as its backing store
// learns them; it passes every call on to the host's backing store, if any, first.
type storedIndex struct {
	inner inmem.BackingStore

	mu    sync.RWMutex
	kinds map[storedKind]*storedKindIndex
}

type storedKind struct {
	ns  resource.Namespace
	typ resource.Type
}

// storedKindIndex holds the stored resources of one type in one namespace.
type storedKindIndex struct {
	mu  sync.RWMutex
	res map[resource.ID]resource.Resource
	// copies are copies of the stored resources, taken as they were stored, when checkSharedReads is set.
	copies map[resource.ID]resource.Resource
}

// checkSharedReads makes every in-memory namespace check, whenever it replaces or drops a stored resource,
// that nobody changed it since it was stored, and end the process if someone did (a reader that changed
// what it read changed it for every reader). It costs a copy of every resource written: the tests set it
// (TALOS_CCM_CHECK_SHARED_READS=1), talos-ccm does not.
var checkSharedReads = os.Getenv("TALOS_CCM_CHECK_SHARED_READS") != ""

// checkUnchanged reports (sharedReadChanged) the stored resource of id if it changed since it was stored
// (see checkSharedReads). k.mu is held.
func (k *storedKindIndex) checkUnchanged(id resource.ID) {
	stored, ok := k.res[id]
	if !ok || k.copies == nil {
		return
	}

	if taken := k.copies[id]; !resource.Equal(stored, taken) || !stored.Metadata().Updated().Equal(taken.Metadata().Updated()) {
		sharedReadChanged(fmt.Sprintf("%s was changed after the in-memory state stored it: something changed a resource it read", resource.String(stored)))
	}
}

// sharedReadChanged ends the process when checkSharedReads finds a stored resource changed: a panic in a
// controller would be recovered by the runtime and retried, and the test would go on.
var sharedReadChanged = func(msg string) {
	fmt.Fprintf(os.Stderr, "%s\n%s", msg, debug.Stack())
	os.Exit(3)
}

func newStoredIndex(inner inmem.BackingStore) *storedIndex {
	return &storedIndex{inner: inner, kinds: map[storedKind]*storedKindIndex{}}
}

// kind returns the index of one type in one namespace, created if create is set (nil otherwise).
func (x *storedIndex) kind(ns resource.Namespace, typ resource.Type, create bool) *storedKindIndex {
	key := storedKind{ns: ns, typ: typ}

	x.mu.RLock()
	k := x.kinds[key]
	x.mu.RUnlock()

	if k != nil || !create {
		return k
	}

	x.mu.Lock()
	defer x.mu.Unlock()

	if k = x.kinds[key]; k == nil {
		k = &storedKindIndex{res: map[resource.ID]resource.Resource{}}

		if checkSharedReads {
			k.copies = map[resource.ID]resource.Resource{}
		}

		x.kinds[key] = k
	}

	return k
}

func (x *storedIndex) get(ns resource.Namespace, typ resource.Type, id resource.ID) (resource.Resource, bool) {
	k := x.kind(ns, typ, false)
	if k == nil {
		return nil, false
	}

	k.mu.RLock()
	defer k.mu.RUnlock()

	res, ok := k.res[id]

	return res, ok
}

func (x *storedIndex) list(ns resource.Namespace, typ resource.Type, options *state.ListOptions) []resource.Resource {
	k := x.kind(ns, typ, false)
	if k == nil {
		return []resource.Resource{}
	}

	k.mu.RLock()

	items := make([]resource.Resource, 0, len(k.res))

	for _, res := range k.res {
		if options.IDQuery.Matches(*res.Metadata()) && options.LabelQueries.Matches(*res.Metadata().Labels()) {
			items = append(items, res)
		}
	}

	k.mu.RUnlock()

	slices.SortFunc(items, func(a, b resource.Resource) int { return strings.Compare(a.Metadata().ID(), b.Metadata().ID()) })

	return items
}

func (x *storedIndex) put(res resource.Resource) {
	md := res.Metadata()
	k := x.kind(md.Namespace(), md.Type(), true)

	k.mu.Lock()
	defer k.mu.Unlock()

	k.checkUnchanged(md.ID())
	k.res[md.ID()] = res

	if k.copies != nil {
		k.copies[md.ID()] = res.DeepCopy()
	}
}

func (x *storedIndex) remove(ptr resource.Pointer) {
	k := x.kind(ptr.Namespace(), ptr.Type(), false)
	if k == nil {
		return
	}

	k.mu.Lock()
	defer k.mu.Unlock()

	k.checkUnchanged(ptr.ID())
	delete(k.res, ptr.ID())
	delete(k.copies, ptr.ID())
}

// Load implements inmem.BackingStore: what the host's store loads is indexed as it is handed on.
func (x *storedIndex) Load(ctx context.Context, handler inmem.LoadHandler) error {
	if x.inner == nil {
		return nil
	}

	return x.inner.Load(ctx, func(typ resource.Type, res resource.Resource) error {
		if err := handler(typ, res); err != nil {
			return err
		}

		x.put(res)

		return nil
	})
}

// Put implements inmem.BackingStore: res is what the in-memory state stores, once the host's store took it.
func (x *storedIndex) Put(ctx context.Context, typ resource.Type, res resource.Resource) error {
	if x.inner != nil {
		if err := x.inner.Put(ctx, typ, res); err != nil {
			return err
		}
	}

	x.put(res)

	return nil
}

// Destroy implements inmem.BackingStore.
func (x *storedIndex) Destroy(ctx context.Context, typ resource.Type, ptr resource.Pointer) error {
	if x.inner != nil {
		if err := x.inner.Destroy(ctx, typ, ptr); err != nil {
			return err
		}
	}

	x.remove(ptr)

	return nil
}

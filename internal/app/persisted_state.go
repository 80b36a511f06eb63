package app

import (
	"context"
	"sync"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
)

// persistedState fronts the sqlite state of the decision namespaces, which only talos-ccm writes:
//
//   - one write at a time: sqlite takes one writer at a time anyway, and concurrent writers would each
//     hold a pooled connection while they wait for the lock, so that the watches, which need a connection
//     to read new events, would wait behind them and decisions would reach their sinks seconds late;
//   - reads by pointer from memory: every write of a controller reads the current version first (a Modify),
//     and that read would otherwise be a query and an unmarshal. Every write passes here, so the copy kept
//     is the one in the database; a read that misses takes the write turn, so no write can slip between
//     the query and the caching of its result.
//
// Lists and watches go to the database.
type persistedState struct {
	state.CoreState

	turn chan struct{}

	mu    sync.RWMutex
	cache map[resourceKey]resource.Resource
}

type resourceKey struct {
	namespace resource.Namespace
	typ       resource.Type
	id        resource.ID
}

func keyOf(ptr resource.Pointer) resourceKey {
	return resourceKey{namespace: ptr.Namespace(), typ: ptr.Type(), id: ptr.ID()}
}

func newPersistedState(st state.CoreState) *persistedState {
	return &persistedState{CoreState: st, turn: make(chan struct{}, 1), cache: map[resourceKey]resource.Resource{}}
}

// write runs fn when it is this writer's turn. Writes take milliseconds: a writer waits for its turn even
// when its context ends, and the database operations run to their end (context.WithoutCancel in the
// callers), so that stopping talos-ccm in the middle of a burst neither interrupts a write nor makes every
// queued controller report a failure.
func (s *persistedState) write(fn func() error) error {
	s.turn <- struct{}{}

	defer func() { <-s.turn }()

	return fn()
}

func (s *persistedState) cached(key resourceKey) (resource.Resource, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()

	res, ok := s.cache[key]

	return res, ok
}

// remember records the resource as it is in the database now; nil forgets it.
func (s *persistedState) remember(key resourceKey, res resource.Resource) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if res == nil {
		delete(s.cache, key)

		return
	}

	s.cache[key] = res.DeepCopy()
}

func (s *persistedState) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) {
	if len(opts) > 0 {
		// Options change what is read (e.g. without unmarshalling): not from the cache.
		return s.CoreState.Get(ctx, ptr, opts...)
	}

	key := keyOf(ptr)

	if res, ok := s.cached(key); ok {
		return res.DeepCopy(), nil
	}

	var res resource.Resource

	ctx = context.WithoutCancel(ctx)

	err := s.write(func() error {
		if cached, ok := s.cached(key); ok {
			res = cached.DeepCopy()

			return nil
		}

		var err error
		if res, err = s.CoreState.Get(ctx, ptr); err != nil {
			return err
		}

		s.remember(key, res)

		return nil
	})

	return res, err
}

func (s *persistedState) Create(ctx context.Context, res resource.Resource, opts ...state.CreateOption) error {
	return s.write(func() error {
		return s.afterWrite(keyOf(res.Metadata()), res, s.CoreState.Create(context.WithoutCancel(ctx), res, opts...))
	})
}

func (s *persistedState) Update(ctx context.Context, res resource.Resource, opts ...state.UpdateOption) error {
	return s.write(func() error {
		return s.afterWrite(keyOf(res.Metadata()), res, s.CoreState.Update(context.WithoutCancel(ctx), res, opts...))
	})
}

func (s *persistedState) Destroy(ctx context.Context, ptr resource.Pointer, opts ...state.DestroyOption) error {
	return s.write(func() error {
		err := s.CoreState.Destroy(context.WithoutCancel(ctx), ptr, opts...)
		if err == nil || state.IsNotFoundError(err) {
			s.remember(keyOf(ptr), nil)
		}

		return err
	})
}

// afterWrite keeps the cache equal to the database after a write: the written resource (the state has set
// its version and timestamps in it) when it succeeded; unchanged when the state refused it for a reason
// that leaves the database as it was; forgotten otherwise, to be read again.
func (s *persistedState) afterWrite(key resourceKey, res resource.Resource, err error) error {
	switch {
	case err == nil:
		s.remember(key, res)
	case state.IsConflictError(err), state.IsPhaseConflictError(err), state.IsOwnerConflictError(err):
	default:
		s.remember(key, nil)
	}

	return err
}

package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// errStarted is returned by SetTransform once the informer runs.
var errStarted = errors.New("informer already started")

// InlineInformer keeps a cache of one resource up to date from a list and a watch, as client-go's shared
// informer does, and calls its event handlers in the goroutine that runs it, as the cache changes: there is
// no queue between the watch and the cache, and no goroutine nor buffer per handler. Nor does it use
// client-go's reflector: it reads and decodes the watch's stream in that same goroutine too (see run). An
// idle shared informer with one handler keeps nine goroutines and a ring of 1,024 notifications; an idle
// InlineInformer keeps two: its own, and the HTTP/2 stream of its watch.
//
// The handlers see what a shared informer's see: every object once as added (those of the initial list
// with isInInitialList), then every change in order, and on a relist (after the watch expired, say) the
// deletion of the objects that vanished, as cache.DeletedFinalStateUnknown, then the objects that changed.
// Unlike a shared informer's, a relist does not report the objects whose resourceVersion is unchanged:
// nothing happened to them, and the cache keeps the copy it had.
//
// Since they run in the informer's goroutine, under its lock, handlers must return quickly (mark a key
// dirty, as the mirrors do), and must neither add nor remove handlers.
type InlineInformer struct {
	src     informerSource
	example runtime.Object
	indexer cache.Indexer

	// synced is closed once the first list is in the cache and its events were handed to the handlers.
	synced chan struct{}

	// mu orders the cache's changes and the handlers' calls with the registration of handlers, so that a
	// handler sees every object once as added before any of its changes.
	mu        sync.Mutex
	handlers  []*inlineRegistration
	transform cache.TransformFunc
	started   bool
	// noBookmarks says that the watches ask for no bookmarks (WithoutBookmarks).
	noBookmarks bool
}

// NewInlineInformer returns an informer of the objects lw lists and watches (example is one of them),
// indexed by indexers (nil for none) besides their namespace/name key. It never resyncs.
func NewInlineInformer(lw cache.ListerWatcher, example runtime.Object, indexers cache.Indexers) *InlineInformer {
	return newInlineInformer(newListerWatcherSource(lw), example, indexers)
}

// newInlineInformer returns an informer of the objects src lists and watches.
func newInlineInformer(src informerSource, example runtime.Object, indexers cache.Indexers) *InlineInformer {
	if indexers == nil {
		indexers = cache.Indexers{}
	}

	return &InlineInformer{
		src:     src,
		example: example,
		indexer: cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, indexers),
		synced:  make(chan struct{}),
	}
}

// SetTransform sets the function every object goes through before it is cached and handed to the handlers
// (to drop what nobody reads). As client-go's, it must be idempotent: the watch-list stream may hand over
// objects already transformed. It fails once the informer runs.
func (f *InlineInformer) SetTransform(transform cache.TransformFunc) error {
	f.mu.Lock()
	defer f.mu.Unlock()

	if f.started {
		return fmt.Errorf("failed to set the transform: %w", errStarted)
	}

	f.transform = transform

	return nil
}

// WithoutBookmarks makes the informer's watches ask for no bookmarks, and returns it; call it before the
// informer runs. The apiserver sends every watch that asks for them a bookmark a minute, which its reader
// decodes: for an informer of an object or two that rarely change (the apiserver's own EndpointSlice), they
// are most of what an idle watch costs, in a host of a thousand clusters three thousand a minute. Without
// them, the resourceVersion a watch resumes from is that of the last change, often older than what the
// apiserver keeps once the watch ends (every 30 to 60 minutes): the informer then lists again, which for
// such an informer is one small list an hour instead of sixty bookmarks. The initial list is a list, not a
// watch-list stream, which needs a bookmark to end.
func (f *InlineInformer) WithoutBookmarks() *InlineInformer {
	f.mu.Lock()
	defer f.mu.Unlock()

	f.noBookmarks = true

	return f
}

// AddEventHandler adds handler: it is at once handed every cached object as added, then every change. The
// registration's HasSynced says when the first list has been handed to it.
func (f *InlineInformer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) { //nolint:ireturn
	f.mu.Lock()
	defer f.mu.Unlock()

	reg := &inlineRegistration{ResourceEventHandler: handler, informer: f}

	for _, obj := range f.indexer.List() {
		handler.OnAdd(obj, true)
	}

	f.handlers = append(f.handlers, reg)

	return reg, nil
}

// RemoveEventHandler removes the handler of reg: once it returns, the handler is not called any more.
func (f *InlineInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	f.mu.Lock()
	defer f.mu.Unlock()

	for i, h := range f.handlers {
		if h == reg {
			f.handlers = append(f.handlers[:i:i], f.handlers[i+1:]...)

			return nil
		}
	}

	return nil
}

// GetStore returns the cache.
func (f *InlineInformer) GetStore() cache.Store { //nolint:ireturn
	return f.indexer
}

// GetIndexer returns the cache, with its indexes (listers read it).
func (f *InlineInformer) GetIndexer() cache.Indexer { //nolint:ireturn
	return f.indexer
}

// HasSynced reports whether the first list is in the cache and was handed to the handlers.
func (f *InlineInformer) HasSynced() bool {
	select {
	case <-f.synced:
		return true
	default:
		return false
	}
}

// HasSyncedChecker returns what is done once HasSynced is true.
func (f *InlineInformer) HasSyncedChecker() cache.DoneChecker { //nolint:ireturn
	return syncedChecker{name: fmt.Sprintf("%T", f.example), done: f.synced}
}

// RunWithContext lists and watches until ctx ends, relisting when the watch expires or fails in a way that
// may have lost an event (see run). It runs once: a second call returns at once.
func (f *InlineInformer) RunWithContext(ctx context.Context) {
	f.mu.Lock()
	started := f.started
	f.started = true
	f.mu.Unlock()

	if started {
		return
	}

	f.run(ctx)
}

// put caches obj, added or updated by the watch, and hands it to the handlers.
func (f *InlineInformer) put(obj any) error {
	obj, err := f.transformed(obj)
	if err != nil {
		return err
	}

	f.mu.Lock()
	defer f.mu.Unlock()

	old, exists, err := f.indexer.Get(obj)
	if err != nil {
		return fmt.Errorf("failed to read the cache: %w", err)
	}

	if err = f.indexer.Update(obj); err != nil {
		return fmt.Errorf("failed to write the cache: %w", err)
	}

	initial := !f.HasSynced()

	for _, h := range f.handlers {
		if exists {
			h.OnUpdate(old, obj)
		} else {
			h.OnAdd(obj, initial)
		}
	}

	return nil
}

// remove drops obj, deleted as the watch says, and hands it to the handlers (even when it was not cached,
// as client-go's informers do).
func (f *InlineInformer) remove(obj any) error {
	obj, err := f.transformed(obj)
	if err != nil {
		return err
	}

	f.mu.Lock()
	defer f.mu.Unlock()

	if err = f.indexer.Delete(obj); err != nil {
		return fmt.Errorf("failed to write the cache: %w", err)
	}

	for _, h := range f.handlers {
		h.OnDelete(obj)
	}

	return nil
}

// replace makes the cache what a list says, and hands the handlers the deletion of the objects that
// vanished, then the objects that are new or changed. transformed says whether the list's objects went
// through the transform already (those a watch streams do, as they come).
func (f *InlineInformer) replace(list []any, resourceVersion string, transformed bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()

	type change struct{ old, obj any }

	var (
		items   = make([]any, 0, len(list))
		changes = make([]change, 0, len(list))
		listed  = make(map[string]struct{}, len(list))
	)

	for _, obj := range list {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return fmt.Errorf("failed to key a listed object: %w", err)
		}

		listed[key] = struct{}{}

		old, exists, err := f.indexer.GetByKey(key)
		if err != nil {
			return fmt.Errorf("failed to read the cache: %w", err)
		}

		if exists && sameVersion(old, obj) {
			items = append(items, old)

			continue
		}

		if !transformed {
			if obj, err = f.transformed(obj); err != nil {
				return err
			}
		}

		items = append(items, obj)
		changes = append(changes, change{old: old, obj: obj})
	}

	var gone []cache.DeletedFinalStateUnknown

	for _, key := range f.indexer.ListKeys() {
		if _, ok := listed[key]; ok {
			continue
		}

		if old, exists, err := f.indexer.GetByKey(key); err == nil && exists {
			gone = append(gone, cache.DeletedFinalStateUnknown{Key: key, Obj: old})
		}
	}

	if err := f.indexer.Replace(items, resourceVersion); err != nil {
		return fmt.Errorf("failed to write the cache: %w", err)
	}

	initial := !f.HasSynced()

	for _, h := range f.handlers {
		for _, obj := range gone {
			h.OnDelete(obj)
		}

		for _, c := range changes {
			if c.old != nil {
				h.OnUpdate(c.old, c.obj)
			} else {
				h.OnAdd(c.obj, initial)
			}
		}
	}

	if initial {
		close(f.synced)
	}

	return nil
}

func (f *InlineInformer) transformed(obj any) (any, error) {
	if f.transform == nil {
		return obj, nil
	}

	if _, tombstone := obj.(cache.DeletedFinalStateUnknown); tombstone {
		return obj, nil
	}

	obj, err := f.transform(obj)
	if err != nil {
		return nil, fmt.Errorf("failed to transform an object: %w", err)
	}

	return obj, nil
}

// sameVersion reports whether a and b are the same version of an object: both have the same, non-empty,
// resourceVersion.
func sameVersion(a, b any) bool {
	am, err := meta.Accessor(a)
	if err != nil {
		return false
	}

	bm, err := meta.Accessor(b)
	if err != nil {
		return false
	}

	return am.GetResourceVersion() != "" && am.GetResourceVersion() == bm.GetResourceVersion()
}

// inlineRegistration is a handler added to an InlineInformer.
type inlineRegistration struct {
	cache.ResourceEventHandler

	informer *InlineInformer
}

// HasSynced implements cache.ResourceEventHandlerRegistration: the handler has been handed the first list
// once the informer has synced, since it was handed the cache when it was added.
func (r *inlineRegistration) HasSynced() bool { return r.informer.HasSynced() }

// HasSyncedChecker implements cache.ResourceEventHandlerRegistration.
func (r *inlineRegistration) HasSyncedChecker() cache.DoneChecker { //nolint:ireturn
	return r.informer.HasSyncedChecker()
}

// syncedChecker is a cache.DoneChecker over a channel closed once done.
type syncedChecker struct {
	name string
	done <-chan struct{}
}

// Name implements cache.DoneChecker.
func (c syncedChecker) Name() string { return c.name }

// Done implements cache.DoneChecker.
func (c syncedChecker) Done() <-chan struct{} { return c.done }

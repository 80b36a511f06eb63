package kubeclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// The timing of an InlineInformer's loop.
const (
	// minWatchTimeout and maxWatchTimeout bound the server-side timeout of a watch, drawn at random between
	// them so that the watches of many informers do not all end at once. They are the apiserver's own bounds
	// for a watch that names no timeout (--min-request-timeout and twice it, by default), not client-go's
	// 5 to 10 minutes: a watch that ends only opens another on the same HTTP/2 connection, so ending it
	// sooner balances nothing, and a dead connection is found by the connection's health check, not by the
	// watch's end. The apiserver sends a watch a bookmark a minute whatever its timeout (the first one about
	// two minutes after it opened, for a watch of 5 minutes as for one of an hour, on kube-apiserver 1.36),
	// so that the resourceVersion a watch resumes from stays as fresh. A host's thousand idle clusters keep
	// three thousand watches: opened again every 7.5 minutes on average, they were a tenth of the host's
	// idle CPU (bench-clusters' idle profile), and a watch just opened is one whose bookmarks start late.
	minWatchTimeout = 30 * time.Minute
	maxWatchTimeout = 60 * time.Minute
	// shortWatch is how long a watch must last, or how many events it must bring (one), for its normal end
	// to be followed at once by the next watch: a server that ends every watch at once is not asked again
	// in a hot loop.
	shortWatch = time.Second
	// listPageSize is the size of a list's pages, when the server cannot stream the initial list.
	listPageSize = 500
)

var (
	// errShortWatch says that a watch ended normally before it brought anything or lasted shortWatch.
	errShortWatch = errors.New("watch ended at once")
	// errInitialListCut says that a watch streaming the initial list ended before the list did.
	errInitialListCut = errors.New("watch ended before its initial list")
	// errOtherType says that a watch event carried an object of another type than the informer's.
	errOtherType = errors.New("watch event of another type")
)

// run lists and watches until ctx ends: it fills the cache from a list, then keeps it up to date from
// watches, each from the resourceVersion the cache is at (the last event's or bookmark's), and lists
// again when a watch says that resourceVersion is too old or fails in a way that may have lost an event.
// It reads every watch's stream in its own goroutine. After an error it waits (see backoff).
func (f *InlineInformer) run(ctx context.Context) {
	var (
		delay backoff
		// rv is the resourceVersion the cache is at: "" until a list filled it, and once a watch lost track.
		rv string
		// transient says that the last watch ended in a way a loaded apiserver ends one (transientWatchError).
		transient bool
	)

	for ctx.Err() == nil {
		var err error

		rv, err = f.watchOnce(ctx, rv)
		if ctx.Err() != nil {
			return
		}

		if err == nil {
			transient = false

			continue
		}

		if reportedWatchError(err, transient) {
			utilruntime.HandleErrorWithContext(ctx, err, "informer failed to list and watch", "type", fmt.Sprintf("%T", f.example))
		}

		transient = transientWatchError(err)

		if !delay.wait(ctx) {
			return
		}
	}
}

// reportedWatchError says whether err, which ended a watch, is reported as an error; afterTransient says that
// the watch before it ended with a transient error (transientWatchError). An expired resourceVersion, and a
// watch-list stream the apiserver ended before the initial list (as it does to its watchers when it is
// loaded or restarts), are what a watch meets in normal operation: the informer lists again without a
// report. So is one transient error; the informer waits before it asks again, and a second in a row, a
// server that keeps refusing, is reported.
func reportedWatchError(err error, afterTransient bool) bool {
	switch {
	case apierrors.IsResourceExpired(err), apierrors.IsGone(err), errors.Is(err, errInitialListCut):
		return false
	case transientWatchError(err):
		return afterTransient
	default:
		return true
	}
}

// transientWatchError says whether err is how a loaded apiserver ends or refuses a watch: a watch that ended
// at once (it closes its watchers so), and a resourceVersion it does not have yet ("Too large resource
// version", what a watch-list asks for when the apiserver's cache lags its storage for seconds, as when
// hundreds of clusters sharing it start at once).
func transientWatchError(err error) bool {
	return errors.Is(err, errShortWatch) || isResourceVersionTooLarge(err)
}

// watchOnce opens one watch from rv (filling the cache first when rv is "") and reads it until it ends. It
// returns the resourceVersion the cache is then at ("" when the next watch must list again), and why the
// watch ended, nil when the server ended it normally.
func (f *InlineInformer) watchOnce(ctx context.Context, rv string) (string, error) {
	events, initial, rv, err := f.open(ctx, rv)
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || isResourceVersionTooLarge(err) {
			rv = ""
		}

		return rv, err
	}

	defer events.close()

	return f.read(ctx, events, rv, initial)
}

// open opens the watch that continues from rv. When rv is "", the watch first streams the initial list
// (client-go's watch-list), or, when the source or the server cannot, the informer lists first; initial is
// then the list to fill, nil when the cache is filled already, and rv the list's resourceVersion.
func (f *InlineInformer) open(ctx context.Context, rv string) (eventReader, *initialList, string, error) {
	f.mu.Lock()
	bookmarks := !f.noBookmarks
	f.mu.Unlock()

	opts := metav1.ListOptions{
		ResourceVersion:     rv,
		AllowWatchBookmarks: bookmarks,
		TimeoutSeconds:      ptr.To(int64((minWatchTimeout + rand.N(maxWatchTimeout-minWatchTimeout)) / time.Second)),
	}

	if rv == "" && bookmarks && f.src.streamsInitialList() {
		streaming := opts
		streaming.SendInitialEvents = ptr.To(true)
		streaming.ResourceVersionMatch = metav1.ResourceVersionMatchNotOlderThan

		events, err := f.src.watch(ctx, streaming)
		if err == nil {
			return events, newInitialList(f.transformed), "", nil
		}

		if ctx.Err() != nil || utilnet.IsConnectionRefused(err) || apierrors.IsTooManyRequests(err) {
			return nil, nil, "", fmt.Errorf("failed to watch: %w", err)
		}

		// The server refused the request: it predates watch-list, or has it off. List, as client-go does.
	}

	if rv == "" {
		var err error

		if rv, err = f.list(ctx); err != nil {
			return nil, nil, "", err
		}

		opts.ResourceVersion = rv
	}

	events, err := f.src.watch(ctx, opts)
	if err != nil {
		return nil, nil, rv, fmt.Errorf("failed to watch: %w", err)
	}

	return events, nil, rv, nil
}

// list fills the cache from a list, page by page, and returns its resourceVersion.
func (f *InlineInformer) list(ctx context.Context) (string, error) {
	var (
		items []any
		opts  = metav1.ListOptions{Limit: listPageSize}
	)

	for {
		list, err := f.src.list(ctx, opts)
		if err != nil {
			if opts.Continue != "" && apierrors.IsResourceExpired(err) {
				// The snapshot the pages came from is gone: list at once, as client-go's pager does.
				items, opts = items[:0], metav1.ListOptions{}

				continue
			}

			return "", fmt.Errorf("failed to list: %w", err)
		}

		listMeta, err := meta.ListAccessor(list)
		if err != nil {
			return "", fmt.Errorf("failed to read a list: %w", err)
		}

		objs, err := meta.ExtractListWithAlloc(list)
		if err != nil {
			return "", fmt.Errorf("failed to read a list: %w", err)
		}

		for _, obj := range objs {
			items = append(items, obj)
		}

		if opts.Continue = listMeta.GetContinue(); opts.Continue == "" {
			rv := listMeta.GetResourceVersion()

			return rv, f.replace(items, rv, false)
		}
	}
}

// read applies the events of a watch to the cache until it ends, and returns what watchOnce does. While
// initial is set, the events are those of the initial list, which fills the cache once the bookmark that
// ends it comes.
func (f *InlineInformer) read(ctx context.Context, events eventReader, rv string, initial *initialList) (string, error) {
	start, received := time.Now(), false

	for {
		typ, obj, err := events.next()

		switch {
		case errors.Is(err, io.EOF) && initial != nil:
			return "", errInitialListCut
		case errors.Is(err, io.EOF) && !received && time.Since(start) < shortWatch:
			return rv, errShortWatch
		case errors.Is(err, io.EOF):
			return rv, nil
		case err != nil && (ctx.Err() != nil || utilnet.IsProbableEOF(err) || errors.Is(err, io.ErrUnexpectedEOF)):
			// The connection broke: no event was lost, the next watch continues from rv.
			return rv, fmt.Errorf("failed to read a watch: %w", err)
		case err != nil:
			return "", fmt.Errorf("failed to decode a watch event: %w", err)
		case typ == watch.Error:
			return "", fmt.Errorf("failed to watch: %w", apierrors.FromObject(obj))
		}

		received = true

		if reflect.TypeOf(obj) != reflect.TypeOf(f.example) {
			utilruntime.HandleErrorWithContext(ctx, fmt.Errorf("%w: %T", errOtherType, obj), "informer failed to apply a watch event",
				"type", fmt.Sprintf("%T", f.example), "event", typ)

			continue
		}

		objMeta, err := meta.Accessor(obj)
		if err != nil {
			return "", fmt.Errorf("failed to read a watch event: %w", err)
		}

		if initial != nil {
			if typ == watch.Bookmark && objMeta.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				if err = f.replace(initial.list(), objMeta.GetResourceVersion(), true); err != nil {
					return "", err
				}

				initial = nil
				rv = objMeta.GetResourceVersion()

				continue
			}

			// The initial events are not in resourceVersion order: rv waits for the bookmark that ends them.
			if err = initial.apply(typ, obj); err != nil {
				return "", err
			}

			continue
		}

		if err = f.apply(typ, obj); err != nil {
			// As client-go's reflector: the object is left out, the watch goes on.
			utilruntime.HandleErrorWithContext(ctx, err, "informer failed to apply a watch event", "type", fmt.Sprintf("%T", f.example))
		}

		rv = objMeta.GetResourceVersion()
	}
}

// apply hands the cache and the handlers a watch event (a bookmark only moves the resourceVersion).
func (f *InlineInformer) apply(typ watch.EventType, obj runtime.Object) error {
	switch typ {
	case watch.Added, watch.Modified:
		return f.put(obj)
	case watch.Deleted:
		return f.remove(obj)
	default:
		return nil
	}
}

// isResourceVersionTooLarge reports whether err says that the server does not have the resourceVersion asked
// for yet (it restarted from an older copy of its storage, say): the informer lists again.
func isResourceVersionTooLarge(err error) bool {
	return apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge)
}

// initialList is the initial list a watch streams, in the order it came (the order the handlers are handed
// it), each object transformed as it comes, so that no untransformed object is kept until the list ends.
type initialList struct {
	transform func(any) (any, error)
	items     []any
	index     map[string]int
}

func newInitialList(transform func(any) (any, error)) *initialList {
	return &initialList{transform: transform, index: map[string]int{}}
}

// apply adds, replaces or drops obj as the event typ says. The server sends only additions before the list's
// end, and the changes after it; a deletion among them drops the object from the list (leaving a hole that
// list skips, so that the others keep their places).
func (l *initialList) apply(typ watch.EventType, obj runtime.Object) error {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return fmt.Errorf("failed to key a listed object: %w", err)
	}

	i, exists := l.index[key]

	switch typ {
	case watch.Added, watch.Modified:
		item, err := l.transform(obj)
		if err != nil {
			return err
		}

		if exists {
			l.items[i] = item
		} else {
			l.index[key] = len(l.items)
			l.items = append(l.items, item)
		}
	case watch.Deleted:
		if exists {
			l.items[i] = nil
		}
	}

	return nil
}

// list returns the objects of the list, in the order they came.
func (l *initialList) list() []any {
	return slices.DeleteFunc(l.items, func(item any) bool { return item == nil })
}

// The waits after an error, client-go's reflector's.
const (
	backoffInitial = 800 * time.Millisecond
	backoffMax     = 30 * time.Second
	// backoffReset is how long the informer must have gone without an error for the wait to start again
	// from backoffInitial.
	backoffReset = 2 * time.Minute
)

// backoff is the wait after an error: doubling from backoffInitial up to backoffMax, each drawn at random
// in its upper half so that many informers failing together do not retry together, and back to
// backoffInitial once the informer has gone backoffReset without an error.
type backoff struct {
	next time.Duration
	// last is when the last wait ended.
	last time.Time
}

// wait waits for the next delay, and reports whether it did (false once ctx ended).
func (b *backoff) wait(ctx context.Context) bool {
	if b.next == 0 || time.Since(b.last) > backoffReset {
		b.next = backoffInitial
	}

	timer := time.NewTimer(b.next/2 + rand.N(b.next/2+1))
	defer timer.Stop()

	b.next = min(2*b.next, backoffMax)

	select {
	case <-timer.C:
		b.last = time.Now()

		return true
	case <-ctx.Done():
		return false
	}
}

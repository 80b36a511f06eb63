package kubeclient

import (
	"context"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

// informerSource lists and watches the objects of an InlineInformer.
type informerSource interface {
	list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error)
	// watch opens a watch, whose events the informer reads in its own goroutine.
	watch(ctx context.Context, opts metav1.ListOptions) (eventReader, error)
	// streamsInitialList reports whether a watch may stream the initial list (client-go's watch-list).
	streamsInitialList() bool
}

// eventReader is an open watch.
type eventReader interface {
	// next blocks until the next event and returns it; io.EOF once the server ended the watch.
	next() (watch.EventType, runtime.Object, error)
	// close ends the watch.
	close()
}

// clientSource lists and watches through a typed client, narrowed by tweak. When the client is one of
// this package's, its watch is a stream the informer decodes itself (see ListClient.watchEvents): client-go's
// watch would decode it in a goroutine of its own.
type clientSource[L runtime.Object] struct {
	client ListWatcher[L]
	tweak  func(*metav1.ListOptions)
}

func (s clientSource[L]) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { //nolint:ireturn
	s.tweak(&opts)

	return s.client.List(ctx, opts)
}

func (s clientSource[L]) watch(ctx context.Context, opts metav1.ListOptions) (eventReader, error) { //nolint:ireturn
	s.tweak(&opts)

	if streamer, ok := s.client.(eventStreamer); ok {
		return streamer.watchEvents(ctx, opts)
	}

	w, err := s.client.Watch(ctx, opts)
	if err != nil {
		return nil, err //nolint:wrapcheck // The informer's loop says what failed.
	}

	return channelEvents{ctx: ctx, w: w}, nil
}

func (s clientSource[L]) streamsInitialList() bool {
	return streamsInitialList(s.client)
}

// listerWatcherSource lists and watches through a cache.ListerWatcher (fake ones, in tests).
type listerWatcherSource struct {
	lw cache.ListerWatcherWithContext
	// watchList says whether lw may stream the initial list.
	watchList bool
}

func newListerWatcherSource(lw cache.ListerWatcher) listerWatcherSource {
	return listerWatcherSource{lw: cache.ToListerWatcherWithContext(lw), watchList: streamsInitialList(lw)}
}

func (s listerWatcherSource) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) { //nolint:ireturn
	return s.lw.ListWithContext(ctx, opts) //nolint:wrapcheck // The informer's loop says what failed.
}

func (s listerWatcherSource) watch(ctx context.Context, opts metav1.ListOptions) (eventReader, error) { //nolint:ireturn
	w, err := s.lw.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err //nolint:wrapcheck // The informer's loop says what failed.
	}

	return channelEvents{ctx: ctx, w: w}, nil
}

func (s listerWatcherSource) streamsInitialList() bool { return s.watchList }

// streamsInitialList reports whether client may stream the initial list in a watch, as client-go's reflector
// decides: unless client-go's WatchListClient feature is off, or client says it cannot (fake clients do).
func streamsInitialList(client any) bool {
	return clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) &&
		!watchlist.DoesClientNotSupportWatchListSemantics(client)
}

// channelEvents reads the events of a watch.Interface.
type channelEvents struct {
	ctx context.Context //nolint:containedctx // The watch's own: next returns once it ends.
	w   watch.Interface
}

func (e channelEvents) next() (watch.EventType, runtime.Object, error) { //nolint:ireturn
	select {
	case ev, ok := <-e.w.ResultChan():
		if !ok {
			return "", nil, io.EOF
		}

		return ev.Type, ev.Object, nil
	case <-e.ctx.Done():
		return "", nil, e.ctx.Err()
	}
}

func (e channelEvents) close() { e.w.Stop() }

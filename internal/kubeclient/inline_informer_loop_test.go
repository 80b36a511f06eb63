package kubeclient_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// scriptedServer is a fakeServer that writes down the lists and the watch requests it is asked, and fails
// the next watch requests with the errors queued.
type scriptedServer struct {
	*fakeServer

	mu       sync.Mutex
	lists    int
	requests []watchRequest
	// failures are the errors the next watch requests fail with, in order.
	failures []error
}

// watchRequest is a watch asked of a scriptedServer.
type watchRequest struct {
	opts metav1.ListOptions
	at   time.Time
}

func newScriptedServer(rv string, nodes ...*corev1.Node) *scriptedServer {
	return &scriptedServer{fakeServer: newFakeServer(rv, nodes...)}
}

// fail makes the next watch requests fail with errs.
func (s *scriptedServer) fail(errs ...error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.failures = append(s.failures, errs...)
}

// asked returns the lists and the watch requests asked so far.
func (s *scriptedServer) asked() (int, []watchRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.lists, append([]watchRequest(nil), s.requests...)
}

func (s *scriptedServer) listWatcher() cache.ListerWatcher { //nolint:ireturn
	inner := cache.ToListerWatcherWithContext(s.fakeServer.listWatcher())

	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			s.mu.Lock()
			s.lists++
			s.mu.Unlock()

			return inner.ListWithContext(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			s.mu.Lock()
			s.requests = append(s.requests, watchRequest{opts: opts, at: time.Now()})

			if len(s.failures) > 0 {
				err := s.failures[0]
				s.failures = s.failures[1:]
				s.mu.Unlock()

				return nil, err
			}

			s.mu.Unlock()

			return inner.WatchWithContext(ctx, opts)
		},
	}, s.fakeServer)
}

// startScripted runs an informer of server's Nodes, with a recorder's handler, and waits for its first watch.
func startScripted(t *testing.T, server *scriptedServer) (*kubeclient.InlineInformer, *recorder, *watch.FakeWatcher) {
	t.Helper()

	informer, events := newScripted(t, server)

	return informer, events, runInformer(t, informer, server.fakeServer)
}

// newScripted returns an informer of server's Nodes, with a recorder's handler.
func newScripted(t *testing.T, server *scriptedServer) (*kubeclient.InlineInformer, *recorder) {
	t.Helper()

	informer := kubeclient.NewInlineInformer(server.listWatcher(), &corev1.Node{}, nil)

	events := &recorder{}

	_, err := informer.AddEventHandler(events.handler())
	require.NoError(t, err)

	return informer, events
}

// A watch the server ends is followed at once by a watch from the last resourceVersion seen, which a
// bookmark advances, without a list: the cache is up to date.
func TestInlineInformerWatchesAgainFromTheLastResourceVersion(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		server := newScriptedServer("1", node("n1", "1"))
		_, events, w := startScripted(t, server)

		w.Modify(node("n1", "3"))
		w.Action(watch.Bookmark, node("", "7"))
		w.Stop()

		<-server.watches

		lists, watches := server.asked()
		require.Len(t, watches, 2)
		assert.Equal(t, 1, lists, "lists")

		first, next := watches[0], watches[1]
		assert.Equal(t, "1", first.opts.ResourceVersion, "the first watch, from the list")
		assert.Equal(t, "7", next.opts.ResourceVersion, "the next watch, from the bookmark")
		assert.True(t, next.opts.AllowWatchBookmarks)
		assert.Equal(t, first.at, next.at, "the next watch waited")

		require.NotNil(t, next.opts.TimeoutSeconds)
		assert.GreaterOrEqual(t, *next.opts.TimeoutSeconds, int64(30*60), "server-side timeout")
		assert.Less(t, *next.opts.TimeoutSeconds, int64(60*60), "server-side timeout")

		assert.Equal(t, []string{"add n1 initial", "update n1 1->3"}, events.take())
	})
}

// A watch request the server refuses because its resourceVersion is too old (410) is followed by a list,
// whose differences with the cache the handlers are handed, then a watch from the list's resourceVersion.
func TestInlineInformerListsAgainWhenTheWatchRequestExpired(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		server := newScriptedServer("1", node("n1", "1"), node("n2", "1"))
		_, events, w := startScripted(t, server)

		server.set("9", node("n1", "9"))
		server.fail(apierrors.NewResourceExpired("too old resource version: 1 (8)"))
		w.Action(watch.Bookmark, node("", "2"))
		w.Stop()

		<-server.watches

		lists, watches := server.asked()
		assert.Equal(t, 2, lists, "lists")
		require.Len(t, watches, 3)
		assert.Equal(t, "2", watches[1].opts.ResourceVersion, "the refused watch")
		assert.Equal(t, "9", watches[2].opts.ResourceVersion, "the watch after the list")

		assert.Equal(t, []string{"add n1 initial", "add n2 initial", "delete n2 unknown", "update n1 1->9"}, events.take())
	})
}

// After any other error, the informer waits before it asks again, twice as long each time up to about 30
// seconds, at random in the upper half of each wait; and no longer once it went two minutes without an
// error. It watches again from where it was, without a list.
func TestInlineInformerBacksOff(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		server := newScriptedServer("1", node("n1", "1"))
		_, _, w := startScripted(t, server)

		// The watch ends at once, with nothing: the server is not asked again at once either.
		waits := []time.Duration{
			800 * time.Millisecond, 1600 * time.Millisecond, 3200 * time.Millisecond, 6400 * time.Millisecond,
			12800 * time.Millisecond, 25600 * time.Millisecond, 30 * time.Second, 30 * time.Second,
		}

		for range len(waits) - 1 {
			server.fail(apierrors.NewInternalError(assert.AnError))
		}

		w.Stop()

		w = <-server.watches

		lists, watches := server.asked()
		assert.Equal(t, 1, lists, "lists")
		require.Len(t, watches, len(waits)+1)

		for i, wait := range waits {
			waited := watches[i+1].at.Sub(watches[i].at)
			assert.GreaterOrEqual(t, waited, wait/2, "wait %d", i)
			assert.LessOrEqual(t, waited, wait, "wait %d", i)
			assert.Equal(t, "1", watches[i+1].opts.ResourceVersion, "watch %d", i+1)
		}

		// A watch that lasts: the next error waits the first wait again.
		time.Sleep(3 * time.Minute)
		server.fail(apierrors.NewTooManyRequests("busy", 0))
		w.Stop()

		<-server.watches

		_, watches = server.asked()
		require.Len(t, watches, len(waits)+3)

		waited := watches[len(waits)+2].at.Sub(watches[len(waits)+1].at)
		assert.GreaterOrEqual(t, waited, waits[0]/2)
		assert.LessOrEqual(t, waited, waits[0])
	})
}

// An ERROR event other than 410 ends the watch, and the informer lists again after a wait: it may have lost
// an event. An object of another type than the informer's is left out.
func TestInlineInformerListsAgainAfterAnErrorEvent(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		server := newScriptedServer("1", node("n1", "1"))
		informer, events, w := startScripted(t, server)

		w.Add(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s", ResourceVersion: "2"}})
		w.Error(&apierrors.NewInternalError(assert.AnError).ErrStatus)

		<-server.watches

		lists, watches := server.asked()
		assert.Equal(t, 2, lists, "lists")
		require.Len(t, watches, 2)
		assert.GreaterOrEqual(t, watches[1].at.Sub(watches[0].at), 400*time.Millisecond, "wait before listing again")

		assert.Equal(t, []string{"add n1 initial"}, events.take())
		assert.Equal(t, []string{"n1"}, informer.GetStore().ListKeys())
	})
}

// When the server refuses a watch that streams the initial list (it predates watch-list, or has it off),
// the informer lists, then watches from the list.
func TestInlineInformerListsWhenTheServerCannotStreamTheList(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		server := newScriptedServer("3", node("n1", "3"))
		server.watchList = true
		server.fail(apierrors.NewBadRequest("sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"))

		informer, events := newScripted(t, server)

		server.watchList = false // runInformer plays no initial events: the list brings them.
		runInformer(t, informer, server.fakeServer)

		lists, watches := server.asked()
		assert.Equal(t, 1, lists, "lists")
		require.Len(t, watches, 2)
		assert.True(t, *watches[0].opts.SendInitialEvents, "the refused watch streams the list")
		assert.Equal(t, metav1.ResourceVersionMatchNotOlderThan, watches[0].opts.ResourceVersionMatch)
		assert.Nil(t, watches[1].opts.SendInitialEvents)
		assert.Equal(t, "3", watches[1].opts.ResourceVersion, "the watch after the list")
		assert.Equal(t, watches[0].at, watches[1].at, "the list waited")

		assert.Equal(t, []string{"add n1 initial"}, events.take())
		assert.True(t, informer.HasSynced())
	})
}

// An informer without bookmarks lists first, even from a server that streams the initial list (whose end
// is a bookmark), and its watches ask for none; a watch that ends continues from the last change.
func TestInlineInformerWithoutBookmarks(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		server := newScriptedServer("3", node("n1", "3"))
		server.watchList = true // the server could stream the list: it is not asked to.

		informer, events := newScripted(t, server)
		informer.WithoutBookmarks()

		server.watchList = false // runInformer plays no initial events: the list brings them.
		w := runInformer(t, informer, server.fakeServer)

		w.Modify(node("n1", "5"))
		w.Stop()

		<-server.watches

		lists, watches := server.asked()
		assert.Equal(t, 1, lists, "lists")
		require.Len(t, watches, 2)

		for _, req := range watches {
			assert.False(t, req.opts.AllowWatchBookmarks)
			assert.Nil(t, req.opts.SendInitialEvents)
		}

		assert.Equal(t, "3", watches[0].opts.ResourceVersion, "the first watch, from the list")
		assert.Equal(t, "5", watches[1].opts.ResourceVersion, "the next watch, from the last change")
		assert.Equal(t, []string{"add n1 initial", "update n1 3->5"}, events.take())
		assert.True(t, informer.HasSynced())
	})
}

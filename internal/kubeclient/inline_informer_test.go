package kubeclient_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// fakeServer lists the Nodes it holds and hands each watch it opens to the test, which plays its events.
type fakeServer struct {
	mu    sync.Mutex
	nodes []*corev1.Node
	rv    string

	// watchList says whether the server streams the initial list in a watch (client-go's WatchList) instead
	// of answering a list.
	watchList bool
	// watches receives every watch the informer opens, when set.
	watches chan *watch.FakeWatcher
}

func newFakeServer(rv string, nodes ...*corev1.Node) *fakeServer {
	return &fakeServer{rv: rv, nodes: nodes, watches: make(chan *watch.FakeWatcher)}
}

// set changes what the next list answers.
func (s *fakeServer) set(rv string, nodes ...*corev1.Node) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.rv, s.nodes = rv, nodes
}

// IsWatchListSemanticsUnSupported tells the reflector whether it may stream the initial list.
func (s *fakeServer) IsWatchListSemanticsUnSupported() bool { return !s.watchList }

func (s *fakeServer) listWatcher() cache.ListerWatcher { //nolint:ireturn
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			s.mu.Lock()
			defer s.mu.Unlock()

			list := &corev1.NodeList{ListMeta: metav1.ListMeta{ResourceVersion: s.rv}}
			for _, n := range s.nodes {
				list.Items = append(list.Items, *n.DeepCopy())
			}

			return list, nil
		},
		WatchFuncWithContext: func(ctx context.Context, _ metav1.ListOptions) (watch.Interface, error) {
			w := watch.NewFake()
			if s.watches == nil {
				return w, nil
			}

			select {
			case s.watches <- w:
				return w, nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		},
	}, s)
}

func node(name, rv string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv}}
}

// recorder writes down the events a handler is handed, one line each.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) handler() cache.ResourceEventHandlerDetailedFuncs {
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			n := obj.(*corev1.Node) //nolint:forcetypeassert

			if initial {
				r.add("add %s initial", n.Name)
			} else {
				r.add("add %s", n.Name)
			}
		},
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Node), obj.(*corev1.Node) //nolint:forcetypeassert

			r.add("update %s %s->%s", n.Name, o.ResourceVersion, n.ResourceVersion)
		},
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				r.add("delete %s unknown", gone.Key)

				return
			}

			r.add("delete %s", obj.(*corev1.Node).Name) //nolint:forcetypeassert
		},
	}
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()

	events := r.events
	r.events = nil

	return events
}

// runInformer runs informer in the bubble until the test's function returns, and waits for its first watch.
func runInformer(t *testing.T, informer *kubeclient.InlineInformer, server *fakeServer) *watch.FakeWatcher {
	t.Helper()

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})

	go func() {
		defer close(done)

		informer.RunWithContext(ctx)
	}()

	t.Cleanup(func() {
		cancel()
		<-done
	})

	w := <-server.watches

	if server.watchList {
		// The initial list comes as the watch's first events, ended by the bookmark that says so.
		for _, n := range server.nodes {
			w.Add(n.DeepCopy())
		}

		w.Action(watch.Bookmark, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			ResourceVersion: server.rv,
			Annotations:     map[string]string{metav1.InitialEventsAnnotationKey: "true"},
		}})
	}

	synctest.Wait()

	return w
}

// expired is the watch event of an apiserver whose history no longer holds the watch's resourceVersion.
var expired = &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired}

// An InlineInformer hands its handlers what a shared informer's get: the initial list as added, the watch's
// changes in order, and after a relist the deletion of what vanished and the objects that changed (only
// those: an unchanged object is not reported again).
func TestInlineInformerEvents(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name      string
		watchList bool
		initial   []*corev1.Node
		watch     []watch.Event
		relist    []*corev1.Node // after the watch expires (410), when set
		want      []string
		cached    []string
	}{
		{
			name:    "initial list",
			initial: []*corev1.Node{node("n1", "1"), node("n2", "1")},
			want:    []string{"add n1 initial", "add n2 initial"},
			cached:  []string{"n1", "n2"},
		},
		{
			name:      "initial list streamed in the watch",
			watchList: true,
			initial:   []*corev1.Node{node("n1", "1"), node("n2", "1")},
			watch:     []watch.Event{{Type: watch.Modified, Object: node("n2", "2")}},
			want:      []string{"add n1 initial", "add n2 initial", "update n2 1->2"},
			cached:    []string{"n1", "n2"},
		},
		{
			name:    "add, update and delete during the watch",
			initial: []*corev1.Node{node("n1", "1")},
			watch: []watch.Event{
				{Type: watch.Added, Object: node("n2", "2")},
				{Type: watch.Modified, Object: node("n1", "3")},
				{Type: watch.Deleted, Object: node("n2", "4")},
				{Type: watch.Bookmark, Object: node("", "5")},
			},
			want:   []string{"add n1 initial", "add n2", "update n1 1->3", "delete n2"},
			cached: []string{"n1"},
		},
		{
			name:    "deletion of an object never seen",
			watch:   []watch.Event{{Type: watch.Deleted, Object: node("n9", "2")}},
			want:    []string{"delete n9"},
			initial: nil,
		},
		{
			name:    "relist after the watch expired",
			initial: []*corev1.Node{node("n1", "1"), node("n2", "1"), node("n3", "1")},
			relist:  []*corev1.Node{node("n1", "1"), node("n2", "5"), node("n4", "5")},
			want: []string{
				"add n1 initial", "add n2 initial", "add n3 initial",
				"delete n3 unknown", "update n2 1->5", "add n4",
			},
			cached: []string{"n1", "n2", "n4"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			synctest.Test(t, func(t *testing.T) {
				server := newFakeServer("1", tc.initial...)
				server.watchList = tc.watchList

				informer := kubeclient.NewInlineInformer(server.listWatcher(), &corev1.Node{}, nil)

				var events recorder

				reg, err := informer.AddEventHandler(events.handler())
				require.NoError(t, err)
				assert.False(t, reg.HasSynced(), "synced before the first list")

				w := runInformer(t, informer, server)
				assert.True(t, reg.HasSynced(), "synced after the first list")

				for _, ev := range tc.watch {
					w.Action(ev.Type, ev.Object)
				}

				if tc.relist != nil {
					server.set("5", tc.relist...)
					w.Error(expired)

					// The reflector relists after its backoff (the bubble's time), then watches again.
					<-server.watches
				}

				synctest.Wait()

				assert.Equal(t, tc.want, events.take())
				assert.ElementsMatch(t, tc.cached, informer.GetStore().ListKeys())
			})
		})
	}
}

// A handler added once the informer has synced is handed the cache as the initial list, then the changes;
// once removed, it is handed nothing more. The transform applies to every object cached and handed over.
func TestInlineInformerHandlersAndTransform(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		server := newFakeServer("1", node("n1", "1"))
		informer := kubeclient.NewInlineInformer(server.listWatcher(), &corev1.Node{}, nil)

		require.NoError(t, informer.SetTransform(func(obj any) (any, error) {
			n := obj.(*corev1.Node) //nolint:forcetypeassert
			n.Labels = map[string]string{"trimmed": "yes"}

			return n, nil
		}))

		w := runInformer(t, informer, server)

		require.Error(t, informer.SetTransform(nil), "a transform set once the informer runs")

		var late recorder

		reg, err := informer.AddEventHandler(late.handler())
		require.NoError(t, err)
		assert.True(t, reg.HasSynced())
		assert.True(t, cache.IsDone(reg.HasSyncedChecker()))

		w.Add(node("n2", "2"))
		synctest.Wait()

		assert.Equal(t, []string{"add n1 initial", "add n2"}, late.take())

		require.NoError(t, informer.RemoveEventHandler(reg))

		w.Modify(node("n2", "3"))
		synctest.Wait()

		assert.Empty(t, late.take(), "events after the handler was removed")

		for _, key := range []string{"n1", "n2"} {
			obj, exists, err := informer.GetStore().GetByKey(key)
			require.NoError(t, err)
			require.True(t, exists, key)
			assert.Equal(t, "yes", obj.(*corev1.Node).Labels["trimmed"], key) //nolint:forcetypeassert
		}
	})
}

package kubeclient_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// idleInformerGoroutines is the most goroutines an idle informer of Informers may keep: its own, which reads
// and decodes its watch's stream, and the HTTP/2 stream of the watch (the client's transport keeps one per
// open stream) make two. A client-go shared informer with one handler keeps nine (its run, its controller's
// queue closer, its processor, the handler's listener's two, its reflector's loop and resync wait, the
// watch's decoder and its HTTP/2 stream), which a host running a thousand clusters of four informers
// multiplies by four thousand.
const idleInformerGoroutines = 2

// pipelineInformers is the number of informers a pipeline starts (Nodes, certificate requests, Services
// and Namespaces), each with a handler, as the mirrors add theirs.
const pipelineInformers = 4

// The informers of a pipeline keep at most idleInformerGoroutines each once synced, against a real
// apiserver; client-go's shared informers over the same list-watches keep more.
func TestInformersIdleGoroutines(t *testing.T) { //nolint:paralleltest // It counts the process's goroutines.
	_, client := sharedClient(t)

	// The connection is opened before counting: the informers' watches share it.
	_, err := client.Nodes().List(t.Context(), metav1.ListOptions{Limit: 1})
	require.NoError(t, err)

	handler := cache.ResourceEventHandlerFuncs{}

	inline := measureIdleGoroutines(t, func(ctx context.Context) func() {
		informers := kubeclient.NewInformers(client)

		for _, informer := range []*kubeclient.InlineInformer{
			informers.Nodes(), informers.CertificateSigningRequests(), informers.Services(), informers.Namespaces(),
		} {
			_, err := informer.AddEventHandler(handler)
			require.NoError(t, err)
		}

		informers.Start(ctx)
		require.True(t, informers.WaitForCacheSync(ctx))

		return informers.Shutdown
	}, func(perInformer float64) bool { return perInformer <= idleInformerGoroutines })

	shared := measureIdleGoroutines(t, func(ctx context.Context) func() {
		var running sync.WaitGroup

		for _, informer := range []cache.SharedIndexInformer{
			sharedInformer(client.Nodes(), &corev1.Node{}),
			sharedInformer(client.CertificateSigningRequests(), &certificatesv1.CertificateSigningRequest{}),
			sharedInformer(client.Services(metav1.NamespaceAll), &corev1.Service{}),
			sharedInformer(client.Namespaces(), &corev1.Namespace{}),
		} {
			_, err := informer.AddEventHandler(handler)
			require.NoError(t, err)

			running.Go(func() { informer.RunWithContext(ctx) })

			require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))
		}

		return running.Wait
	}, func(perInformer float64) bool { return perInformer > idleInformerGoroutines })

	t.Logf("idle goroutines per informer: %.1f (client-go's shared informer: %.1f)", inline, shared)

	require.LessOrEqual(t, inline, float64(idleInformerGoroutines), "goroutines per idle informer")
	require.Greater(t, shared, float64(idleInformerGoroutines), "goroutines per idle shared informer")
}

// measureIdleGoroutines starts the informers of start until it returns the goroutines they keep per
// informer, read until settled says the figure has settled or 20 seconds have passed (a list's goroutine
// may still be ending, a listener's may still be starting); then it stops them, and waits until their
// goroutines are gone.
func measureIdleGoroutines(t *testing.T, start func(ctx context.Context) (wait func()), settled func(float64) bool) float64 {
	t.Helper()

	before := goruntime.NumGoroutine()

	ctx, cancel := context.WithCancel(t.Context())
	wait := start(ctx)

	var perInformer float64

	_ = testenv.WaitFor(t.Context(), 20*time.Second, 10*time.Millisecond, "settled", func(context.Context) error {
		perInformer = float64(goruntime.NumGoroutine()-before) / pipelineInformers
		if !settled(perInformer) {
			return fmt.Errorf("%.1f goroutines per informer", perInformer)
		}

		return nil
	})

	cancel()
	wait()

	testenv.Eventually(t, 20*time.Second, 10*time.Millisecond, "informers' goroutines gone", func(context.Context) error {
		if n := goruntime.NumGoroutine(); n > before {
			return fmt.Errorf("%d goroutines, %d before", n, before)
		}

		return nil
	})

	return perInformer
}

// sharedInformer is a client-go shared informer over client, as kubeclient.NewInformer made them before
// InlineInformer.
func sharedInformer[L runtime.Object](client kubeclient.ListWatcher[L], example runtime.Object) cache.SharedIndexInformer { //nolint:ireturn
	return cache.NewSharedIndexInformerWithOptions(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, opts)
		},
	}, example, cache.SharedIndexInformerOptions{})
}

// The Nodes informer hands its handlers a real apiserver's Node events as they happen: the Node created,
// changed, deleted.
func TestInformersDeliverNodeEvents(t *testing.T) {
	t.Parallel()

	_, client := sharedClient(t)

	const name = "kubeclient-events"

	var (
		mu     sync.Mutex
		events []string
	)

	record := func(event string, obj any) {
		if n, ok := obj.(*corev1.Node); ok && n.Name == name {
			mu.Lock()
			events = append(events, fmt.Sprintf("%s %s", event, n.Labels["step"]))
			mu.Unlock()
		}
	}

	informers := kubeclient.NewInformers(client)

	_, err := informers.Nodes().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record("add", obj) },
		UpdateFunc: func(_, obj any) { record("update", obj) },
		DeleteFunc: func(obj any) { record("delete", obj) },
	})
	require.NoError(t, err)

	startInformers(t, informers)

	ctx := t.Context()

	_, err = client.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"step": "created"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = client.Nodes().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"step":"changed"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)

	require.NoError(t, client.Nodes().Delete(ctx, name, metav1.DeleteOptions{}))

	want := []string{"add created", "update changed", "delete changed"}

	eventually(t, "the Node's events", func() error {
		mu.Lock()
		defer mu.Unlock()

		if !slices.Equal(events, want) {
			return fmt.Errorf("events %q, want %q", events, want)
		}

		return nil
	})
}

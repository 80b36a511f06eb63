package kubeclient_test

import (
	"context"
	goruntime "runtime"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// idleListWatcher lists no Node and watches without an event until the watch is stopped: an idle cluster's
// informer, without the apiserver's connection (whose HTTP/2 stream every informer keeps alike; a shared
// informer also keeps a goroutine that decodes the stream, where an InlineInformer decodes it in its own).
func idleListWatcher() cache.ListerWatcher { //nolint:ireturn
	return (&fakeServer{rv: "1"}).listWatcher()
}

// runner is an informer as the benchmark runs it: with one handler, as a mirror adds.
type runner interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
	RunWithContext(ctx context.Context)
	HasSynced() bool
}

// BenchmarkIdleInformer: the heap, goroutines and goroutine stacks an idle informer with one handler keeps,
// an InlineInformer against client-go's shared informer (each of a pipeline's four informers, in each of a
// host's clusters).
func BenchmarkIdleInformer(b *testing.B) {
	for _, bc := range []struct {
		name string
		make func() runner
	}{
		{"inline", func() runner { return kubeclient.NewInlineInformer(idleListWatcher(), &corev1.Node{}, nil) }},
		{"shared", func() runner {
			return cache.NewSharedIndexInformerWithOptions(idleListWatcher(), &corev1.Node{}, cache.SharedIndexInformerOptions{})
		}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const n = 100

			var heap, stack, goroutines float64

			for b.Loop() {
				heap, stack, goroutines = measureIdleInformers(b, n, bc.make)
			}

			b.ReportMetric(heap, "heap-B/informer")
			b.ReportMetric(stack, "stack-B/informer")
			b.ReportMetric(goroutines, "goroutines/informer")
		})
	}
}

// measureIdleInformers runs n informers made by newInformer until they have synced, and returns what they keep
// each: live heap, goroutine stacks and goroutines.
func measureIdleInformers(b *testing.B, n int, newInformer func() runner) (heap, stack, goroutines float64) {
	b.Helper()

	var before, after goruntime.MemStats

	ctx, cancel := context.WithCancel(b.Context())

	var running sync.WaitGroup

	goruntime.GC()
	goruntime.ReadMemStats(&before)

	started := goruntime.NumGoroutine()
	informers := make([]runner, n)

	for i := range informers {
		informers[i] = newInformer()

		if _, err := informers[i].AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
			b.Fatal(err)
		}

		running.Go(func() { informers[i].RunWithContext(ctx) })
	}

	for _, informer := range informers {
		if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			b.Fatal("not synced")
		}
	}

	goroutines = float64(goruntime.NumGoroutine()-started) / float64(n)

	goruntime.GC()
	goruntime.ReadMemStats(&after)

	heap = (float64(after.HeapAlloc) - float64(before.HeapAlloc)) / float64(n)
	stack = (float64(after.StackInuse) - float64(before.StackInuse)) / float64(n)

	goruntime.KeepAlive(informers)

	cancel()
	running.Wait()

	return heap, stack, goroutines
}

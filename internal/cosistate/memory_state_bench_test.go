package cosistate_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/siderolabs/gen/channel"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// benchStates are the states the benchmarks compare: MemoryStateBuilder's, read directly and through a
// cluster's prefixed view, and the COSI runtime's in-memory state with the history talos-ccm gave it
// before (4 events to start with, up to 256).
var benchStates = []struct {
	name    string
	builder namespaced.StateBuilder
	view    bool
}{
	{"state=talos-ccm", cosistate.MemoryStateBuilder(), false},
	{"state=talos-ccm-view", cosistate.MemoryStateBuilder(), true},
	{"state=inmem", inmemBuilder, false},
}

// inmemBuilder builds the COSI runtime's in-memory namespaces with the history talos-ccm gave them.
func inmemBuilder(ns resource.Namespace) state.CoreState {
	return inmem.NewStateWithOptions(inmem.WithHistoryInitialCapacity(4), inmem.WithHistoryMaxCapacity(256), inmem.WithHistoryGap(2))(ns)
}

// newBenchState returns a state of builder's namespaces, or a prefixed view of one.
func newBenchState(b *testing.B, builder namespaced.StateBuilder, view bool) state.State {
	b.Helper()

	st := state.WrapCore(namespaced.NewState(builder))
	if !view {
		return st
	}

	st, err := cosistate.NewPrefixedState(st, alphaPrefix)
	require.NoError(b, err)

	return st
}

// BenchmarkMemoryStateHeapPerNode: the heap a state keeps per KubeNode once 2,000 were created and
// updated twice each (a Node's mirror as it joins), with one aggregated watcher that read every event (as
// the controller runtime does), and the goroutines each of 17 idle watches costs (an embedded cluster's
// pipeline watches about 17 types).
func BenchmarkMemoryStateHeapPerNode(b *testing.B) {
	const (
		nodes   = 2000
		watches = 17
	)

	for _, bs := range benchStates {
		b.Run(bs.name, func(b *testing.B) {
			var goroutinesPerWatch float64

			testheap.Report(b, "B/node", func() float64 {
				// The goroutines of the watches of an iteration end after it: the next one waits for them,
				// so that the state they hold is not counted as its own state's heap before.
				ignore := goleak.IgnoreCurrent()

				ctx, cancel := context.WithCancel(b.Context())
				defer func() {
					cancel()
					require.NoError(b, goleak.Find(ignore))
				}()

				var st state.State

				perNode := testheap.RetainedPer(nodes, func() {
					st = newBenchState(b, bs.builder, bs.view)
					writeNodes(ctx, b, st, nodes)
				})

				before := goruntime.NumGoroutine()

				for i := range watches {
					// No bootstrap: the watch is idle from the start.
					kind := resource.NewMetadata(kube.NamespaceName, fmt.Sprintf("Idle%d.kube.tccm.dev", i), "", resource.VersionUndefined)
					require.NoError(b, st.WatchKindAggregated(ctx, kind, make(chan []state.Event)))
				}

				goroutinesPerWatch = float64(goruntime.NumGoroutine()-before) / watches

				goruntime.KeepAlive(st)

				return perNode
			})

			b.ReportMetric(goroutinesPerWatch, "goroutines/idle-watch")
		})
	}
}

// writeNodes creates n KubeNodes in st and updates each twice, while a watcher reads every event: each
// Node is written once the watcher saw the last write of the one before (the COSI runtime's in-memory
// state fails a watcher that falls behind its history).
func writeNodes(ctx context.Context, b *testing.B, st state.State, n int) {
	b.Helper()

	ch := make(chan []state.Event)
	require.NoError(b, st.WatchKindAggregated(ctx, kube.NewKubeNode(kube.NamespaceName, "").Metadata(), ch, state.WithBootstrapContents(true)))

	written := make(chan struct{})

	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case events := <-ch:
				for _, ev := range events {
					if ev.Type == state.Errored {
						panic(ev.Error)
					}

					if ev.Resource.Metadata().Version().Value() == 3 && !channel.SendWithContext(ctx, written, struct{}{}) {
						return
					}
				}
			}
		}
	}()

	for i := range n {
		node := kube.NewKubeNode(kube.NamespaceName, fmt.Sprintf("n%05d", i))
		node.TypedSpec().Value = &specs.KubeNodeSpec{Uid: fmt.Sprintf("uid-%05d", i)}
		require.NoError(b, st.Create(ctx, node))

		for _, provider := range []string{"talos://a", "talos://b"} {
			next := node.DeepCopy().(*kube.KubeNode) //nolint:forcetypeassert // A KubeNode copies as one.
			next.TypedSpec().Value.ProviderId = provider
			require.NoError(b, st.Update(ctx, next))
			node = next
		}

		<-written
	}
}

// BenchmarkViewWatchEvent: one update of a resource through a cluster's prefixed view, until the view's
// watcher (an aggregated watch, as the controller runtime's) got its event, translated: over
// MemoryStateBuilder's namespaces and over the COSI runtime's in-memory ones.
func BenchmarkViewWatchEvent(b *testing.B) {
	for _, host := range []struct {
		name    string
		builder namespaced.StateBuilder
	}{{"host=talos-ccm", cosistate.MemoryStateBuilder()}, {"host=inmem", inmemBuilder}} {
		b.Run(host.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(b.Context())
			defer cancel()

			view := newBenchState(b, host.builder, true)
			node := kube.NewKubeNode(kube.NamespaceName, "n")
			node.TypedSpec().Value = &specs.KubeNodeSpec{Uid: "uid"}
			require.NoError(b, view.Create(ctx, node))

			ch := make(chan []state.Event)
			require.NoError(b, view.WatchKindAggregated(ctx, node.Metadata(), ch))

			b.ReportAllocs()

			for b.Loop() {
				next := node.DeepCopy().(*kube.KubeNode) //nolint:forcetypeassert // A KubeNode copies as one.
				require.NoError(b, view.Update(ctx, next))
				node = next

				for seen := false; !seen; {
					for _, ev := range <-ch {
						seen = ev.Resource.Metadata().Namespace() == kube.NamespaceName && ev.Resource.Metadata().Version().Equal(node.Metadata().Version())
					}
				}
			}
		})
	}
}

// BenchmarkViewGet: one Get and one List of a single resource through a cluster's prefixed view, as a
// controller reads its input: what the view adds to the host's read (the host's name of the resource, and
// the copy in the view's namespace) shows against the host's own, read directly.
func BenchmarkViewGet(b *testing.B) {
	for _, view := range []bool{false, true} {
		b.Run(fmt.Sprintf("view=%t", view), func(b *testing.B) {
			ctx := b.Context()
			st := newBenchState(b, cosistate.MemoryStateBuilder(), view)
			node := kube.NewKubeNode(kube.NamespaceName, "n")
			node.TypedSpec().Value = &specs.KubeNodeSpec{Uid: "uid"}
			require.NoError(b, st.Create(ctx, node))

			b.ReportAllocs()

			for b.Loop() {
				got, err := st.Get(ctx, node.Metadata())
				require.NoError(b, err)
				require.Equal(b, kube.NamespaceName, got.Metadata().Namespace())

				list, err := st.List(ctx, node.Metadata())
				require.NoError(b, err)
				require.Len(b, list.Items, 1)
			}
		})
	}
}

package cosistate_test

import (
	"context"
	"fmt"
	goruntime "runtime"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/conformance"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/require"
	"github.com/stretchr/testify/suite"
	"go.uber.org/goleak"

	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// thing is a resource of any type, without a spec.
type thing struct{ md resource.Metadata }

func (r *thing) Metadata() *resource.Metadata { return &r.md }

func (r *thing) Spec() any { return nil }

func (r *thing) DeepCopy() resource.Resource { return &thing{md: r.md.Copy()} } //nolint:ireturn

// TestMemoryPrefixedStateConformance runs the COSI state conformance suite on a prefixed view of a host
// state of MemoryStateBuilder's namespaces: its watches are resumed watches, run by the pumps of their
// channels, through the view's forwarders.
func TestMemoryPrefixedStateConformance(t *testing.T) {
	t.Parallel()

	view, err := cosistate.NewPrefixedState(state.WrapCore(namespaced.NewState(cosistate.MemoryStateBuilder())), alphaPrefix)
	require.NoError(t, err)

	suite.Run(t, &prefixedSuite{StateSuite: conformance.StateSuite{
		State:      view,
		Namespaces: []resource.Namespace{kube.NamespaceName, node.NamespaceName},
	}})
}

// TestWatchesOfOneChannelShareGoroutines: the watches of a view that hand on to one channel (as the controller
// runtime's do, one per type) cost the in-memory state's two goroutines each, and one goroutine of the view
// and one of the resumed watches for all of them, not one each; each hands on its type's events until its
// own context ends, and the shared goroutines end with the last.
func TestWatchesOfOneChannelShareGoroutines(t *testing.T) { //nolint:paralleltest // It counts the process's goroutines.
	ignore := goleak.IgnoreCurrent()

	view, err := cosistate.NewPrefixedState(state.WrapCore(namespaced.NewState(cosistate.MemoryStateBuilder())), alphaPrefix)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	const n = 10

	kind := func(i int) resource.Kind {
		return resource.NewMetadata(kube.NamespaceName, fmt.Sprintf("Things%d.kube.tccm.dev", i), "", resource.VersionUndefined)
	}

	before := goruntime.NumGoroutine()

	ch := make(chan []state.Event)
	stops := make([]context.CancelFunc, n)

	for i := range n {
		var watchCtx context.Context

		watchCtx, stops[i] = context.WithCancel(ctx)
		require.NoError(t, view.WatchKindAggregated(watchCtx, kind(i), ch, state.WithBootstrapContents(true)))
	}

	bootstrapped := 0
	for bootstrapped < n {
		select {
		case events := <-ch:
			require.Len(t, events, 1)
			require.Equal(t, state.Bootstrapped, events[0].Type)

			bootstrapped++
		case <-ctx.Done():
			t.Fatalf("%d of %d watches bootstrapped", bootstrapped, n)
		}
	}

	// Two goroutines of the in-memory state per watch, one forwarder and one pump for all of them (it was
	// three per watch, and four through the view).
	require.LessOrEqual(t, goruntime.NumGoroutine()-before, 2*n+2)

	// The first watch ends: the others still hand on their events, in the view's namespace.
	stops[0]()

	for i := 1; i < n; i++ {
		require.NoError(t, view.Create(ctx, &thing{md: resource.NewMetadata(kube.NamespaceName, kind(i).Type(), "x", resource.VersionUndefined)}))

		select {
		case events := <-ch:
			require.Len(t, events, 1)
			require.Equal(t, state.Created, events[0].Type)
			require.Equal(t, kube.NamespaceName, events[0].Resource.Metadata().Namespace())
			require.Equal(t, kind(i).Type(), events[0].Resource.Metadata().Type())
		case <-ctx.Done():
			t.Fatalf("no event of watch %d", i)
		}
	}

	for _, stop := range stops {
		stop()
	}

	goleak.VerifyNone(t, ignore)
}

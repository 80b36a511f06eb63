package ipam_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// startAllocator runs a NodeCIDRAllocatorController on a new suite, bounded by two minutes unless opts say
// otherwise.
func startAllocator(t *testing.T, options ipam.NodeCIDROptions, opts ...ctest.Option) *ctest.Suite {
	t.Helper()

	s := ctest.New(t, append([]ctest.Option{ctest.WithTimeout(2 * time.Minute)}, opts...)...)
	s.Register(&ipam.NodeCIDRAllocatorController{Options: options})
	s.Start()

	return s
}

// createNode creates the mirror of a Node, age milliseconds younger than t0; it is safe in any goroutine.
func createNode(ctx context.Context, st state.State, name string, age int) error {
	kn := kube.NewKubeNode(kube.NamespaceName, name)
	kn.TypedSpec().Value = &specs.KubeNodeSpec{
		Uid:     "uid-" + name,
		Created: timestamppb.New(t0.Add(time.Duration(age) * time.Millisecond)),
	}

	return st.Create(ctx, kn)
}

// setSynced says that the mirror of syncID holds every object.
func setSynced(s *ctest.Suite, syncID string) {
	sync := kube.NewKubeSync(kube.NamespaceName, syncID)
	sync.TypedSpec().Value.Synced = true
	s.Create(sync)
}

// allocations lists the allocated pod CIDRs by allocation ID, and fails on a duplicate.
func allocations(ctx context.Context, t *testing.T, st state.State) map[string]string {
	t.Helper()

	list, err := safe.StateListAll[*ipamres.IPAllocation](ctx, st)
	require.NoError(t, err)

	out := map[string]string{}
	holder := map[string]string{}

	for res := range list.All() {
		spec := res.TypedSpec().Value
		if spec.GetState() != ipamres.StateAllocated {
			continue
		}

		if other, dup := holder[spec.GetAddress()]; dup {
			t.Fatalf("duplicate: %s is held by %s and %s", spec.GetAddress(), other, res.Metadata().ID())
		}

		holder[spec.GetAddress()] = res.Metadata().ID()
		out[res.Metadata().ID()] = spec.GetAddress()
	}

	return out
}

// waitAllocations waits until the allocated pod CIDRs are exactly those of every family of the named
// Nodes, following the allocations' watch events, and returns them, failing on a duplicate.
func waitAllocations(ctx context.Context, t *testing.T, st state.State, families []string, names ...string) map[string]string {
	t.Helper()

	want := map[resource.ID]bool{}

	for _, name := range names {
		for _, family := range families {
			want[ipamres.NodeAllocationID(name, family)] = true
		}
	}

	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

	events := make(chan state.Event)
	require.NoError(t, st.WatchKind(ctx, ipamres.NewIPAllocation(ipamres.NamespaceName, "").Metadata(), events, state.WithBootstrapContents(true)))

	// allocated holds the IDs of the allocations in state allocated; wanted counts those of want among them.
	allocated := map[resource.ID]bool{}
	wanted, bootstrapped := 0, false

	for !bootstrapped || wanted != len(want) || len(allocated) != len(want) {
		var ev state.Event

		select {
		case <-ctx.Done():
			t.Fatalf("expected %d allocations, %d of them and %d others are allocated", len(want), wanted, len(allocated)-wanted)
		case ev = <-events:
		}

		switch ev.Type {
		case state.Bootstrapped:
			bootstrapped = true

			continue
		case state.Errored:
			require.NoError(t, ev.Error)
		case state.Created, state.Updated, state.Destroyed, state.Noop:
		}

		if ev.Resource == nil {
			continue
		}

		id := ev.Resource.Metadata().ID()
		was := allocated[id]

		is := ev.Type != state.Destroyed
		if alloc, ok := ev.Resource.(*ipamres.IPAllocation); ok && is {
			is = alloc.TypedSpec().Value.GetState() == ipamres.StateAllocated
		}

		switch {
		case is && !was:
			allocated[id] = true

			if want[id] {
				wanted++
			}
		case !is && was:
			delete(allocated, id)

			if want[id] {
				wanted--
			}
		}
	}

	return allocations(ctx, t, st)
}

// TestNodeCIDRAllocatorConcurrent creates, applies and deletes 1,000 Nodes from many goroutines at once:
// no CIDR is ever held twice, deleted Nodes release theirs, and Nodes that already carry a CIDR keep it.
func TestNodeCIDRAllocatorConcurrent(t *testing.T) {
	const (
		nodes   = 1000
		writers = 20
	)

	s := startAllocator(t, ipam.NodeCIDROptions{ClusterCIDRs: prefixes("10.0.0.0/14", "fd00:1::/48")})
	ctx, st := s.Ctx(), s.State

	s.Create(config.NewConfig(config.NamespaceName, config.ActiveID))
	setSynced(s, kube.NodesSyncID)

	// Half of the Nodes are created while a "sink" applies the allocations it sees to the Nodes, as the
	// real sink does (spec.podCIDRs set from an allocation): claims and allocations interleave.
	applied := map[string]bool{}

	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)

	apply := func() {
		list, err := safe.StateListAll[*ipamres.IPAllocation](ctx, st)
		if err != nil {
			t.Error(err)

			return
		}

		for res := range list.All() {
			kind, name, family, _ := ipamres.ParseAllocationID(res.Metadata().ID())
			podCIDRs := res.TypedSpec().Value.GetNodePodCidrs()

			if kind != "node" || family != ipamres.FamilyIPv4 || len(podCIDRs) == 0 {
				continue
			}

			mu.Lock()
			done := applied[name]
			applied[name] = true
			mu.Unlock()

			if done {
				continue
			}

			_, err := safe.StateUpdateWithConflicts(ctx, st, kube.NewKubeNode(kube.NamespaceName, name).Metadata(), func(kn *kube.KubeNode) error {
				kn.TypedSpec().Value.PodCidrs = podCIDRs

				return nil
			})
			if err != nil && !state.IsNotFoundError(err) {
				t.Error(err)
			}
		}
	}

	for w := range writers {
		wg.Go(func() {
			for i := w; i < nodes; i += writers {
				if err := createNode(ctx, st, fmt.Sprintf("n%04d", i), i); err != nil {
					t.Error(err)
				}

				if i%97 == 0 {
					apply()
				}
			}
		})
	}

	wg.Wait()

	var live []string
	for i := range nodes {
		live = append(live, fmt.Sprintf("n%04d", i))
	}

	dual := []string{ipamres.FamilyIPv4, ipamres.FamilyIPv6}
	got := waitAllocations(ctx, t, st, dual, live...)

	// Delete every other Node and create as many new ones, concurrently.
	for w := range writers {
		wg.Go(func() {
			for i := w; i < nodes; i += writers {
				if i%2 == 0 {
					if err := st.Destroy(ctx, kube.NewKubeNode(kube.NamespaceName, fmt.Sprintf("n%04d", i)).Metadata()); err != nil {
						t.Error(err)
					}
				} else if err := createNode(ctx, st, fmt.Sprintf("m%04d", i), nodes+i); err != nil {
					t.Error(err)
				}
			}
		})
	}

	wg.Wait()

	live = live[:0]
	for i := 1; i < nodes; i += 2 {
		live = append(live, fmt.Sprintf("n%04d", i), fmt.Sprintf("m%04d", i))
	}

	after := waitAllocations(ctx, t, st, dual, live...)

	for i := 1; i < nodes; i += 2 {
		for _, family := range []string{ipamres.FamilyIPv4, ipamres.FamilyIPv6} {
			id := ipamres.NodeAllocationID(fmt.Sprintf("n%04d", i), family)
			assert.Equal(t, got[id], after[id], "a surviving Node keeps its CIDR: %s", id)
		}
	}

	for i := 0; i < nodes; i += 2 {
		assert.NotContains(t, after, ipamres.NodeAllocationID(fmt.Sprintf("n%04d", i), ipamres.FamilyIPv4), "released")
	}

	ctest.AssertResource(s, "pod/ipv4", func(pool *ipamres.IPPool, a *assert.Assertions) {
		a.Equal(uint64(1024), pool.TypedSpec().Value.GetSize())
		a.Equal(uint64(nodes), pool.TypedSpec().Value.GetUsed())
	})

	// Every allocated block is a /24 inside the range.
	for id, addr := range after {
		p := netip.MustParsePrefix(addr)
		if p.Addr().Is4() {
			assert.Equal(t, 24, p.Bits(), id)
			assert.True(t, netip.MustParsePrefix("10.0.0.0/14").Contains(p.Addr()), id)
		}
	}
}

// TestNodeCIDRAllocatorRestart stops the allocator, changes the Nodes while it is down, and starts a new
// one on the same state: nothing is decided before the Node mirror is complete again, the Nodes deleted
// meanwhile release their CIDRs, the others keep theirs, and new Nodes get free ones.
func TestNodeCIDRAllocatorRestart(t *testing.T) {
	// In a bubble: synctest.Wait tells when the allocator is idle, to show that it decides nothing.
	synctest.Test(t, func(t *testing.T) {
		opts := ipam.NodeCIDROptions{ClusterCIDRs: prefixes("10.0.0.0/20")}

		first := startAllocator(t, opts, ctest.WithTimeout(time.Minute))
		ctx, st := first.Ctx(), first.State

		first.Create(config.NewConfig(config.NamespaceName, config.ActiveID))
		setSynced(first, kube.NodesSyncID)

		for i := range 10 {
			require.NoError(t, createNode(ctx, st, fmt.Sprintf("n%d", i), i))
		}

		v4 := []string{ipamres.FamilyIPv4}
		before := waitAllocations(ctx, t, st, v4, "n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9")

		first.Stop()

		// While it is down: the Node mirror is rebuilt from scratch (as after a restart), three Nodes are gone
		// and two are new. The second suite's context outlives the first's.
		second := ctest.New(t, ctest.WithState(st), ctest.WithTimeout(time.Minute))
		ctx = second.Ctx()

		ctest.Destroy[*kube.KubeSync](second, kube.NodesSyncID)
		ctest.Destroy[*kube.KubeNode](second, "n1", "n4", "n7")

		second.Register(&ipam.NodeCIDRAllocatorController{Options: opts})
		second.Start()

		for _, name := range []string{"x1", "x2"} {
			require.NoError(t, createNode(ctx, st, name, 100))
		}

		// Before the mirror is complete, nothing is released or allocated: once the allocator is idle (every
		// goroutine of the bubble blocked), the allocations are those of before.
		synctest.Wait()
		assert.Equal(t, before, allocations(ctx, t, st))

		setSynced(second, kube.NodesSyncID)

		after := waitAllocations(ctx, t, st, v4, "n0", "n2", "n3", "n5", "n6", "n8", "n9", "x1", "x2")

		for id, addr := range before {
			_, name, _, _ := ipamres.ParseAllocationID(id)
			if name == "n1" || name == "n4" || name == "n7" {
				assert.NotContains(t, after, id)
			} else {
				assert.Equal(t, addr, after[id], id)
			}
		}

		assert.Contains(t, after, ipamres.NodeAllocationID("x1", ipamres.FamilyIPv4))
		assert.Contains(t, after, ipamres.NodeAllocationID("x2", ipamres.FamilyIPv4))
	})
}

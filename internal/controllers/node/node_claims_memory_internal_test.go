package node

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// claimsRetainedPerNode returns the heap the registry keeps per Node once n Nodes' claims are bound, each
// on its machine, its providerID and two addresses, as a fleet's are, and as the Node transform binds them:
// claimOf of the Node's NodeTransform. The Nodes' names and specs, which the state holds, are made before
// the heap is first measured and kept alive after: only what binding keeps counts.
func claimsRetainedPerNode(tb testing.TB, n int) float64 {
	tb.Helper()

	names := make([]string, n)
	nodes := make([]*specs.KubeNodeSpec, n)
	transforms := make([]*specs.NodeTransformSpec, n)

	for i := range n {
		providerID := fmt.Sprintf("talos://metal/10.%d.%d.1", i/256, i%256)
		names[i] = fmt.Sprintf("worker-%05d", i)
		nodes[i] = &specs.KubeNodeSpec{ProviderId: providerID, Created: timestamppb.New(time.Unix(int64(1000+i), 0))}
		transforms[i] = &specs.NodeTransformSpec{
			Verified: true, Machine: fmt.Sprintf("uuid/%08d-0000-0000-0000-000000000000", i), ProviderId: providerID,
			Addresses: []*specs.NodeAddress{
				{Type: nodeaddress.AddressInternalIP, Address: fmt.Sprintf("10.%d.%d.1", i/256, i%256)},
				{Type: nodeaddress.AddressInternalIP, Address: fmt.Sprintf("fd00::%x", i)},
			},
		}
	}

	r := newClaimRegistry()

	perNode := testheap.RetainedPer(n, func() {
		for i, name := range names {
			conflict, _, _ := r.bind(claimOf(name, nodes[i], transforms[i], true))
			require.Empty(tb, conflict)
		}
	})

	runtime.KeepAlive(r)
	runtime.KeepAlive(nodes)
	runtime.KeepAlive(transforms)

	return perNode
}

// The registry keeps each Node's claim once, and a reference to it per key: it kept a slice of a full
// claimant per key, and the list of each Node's keys grown by appends, 649 bytes per Node of four keys
// (the keys' own bytes apart); then 577 with the keys' bytes, each a copy of the NodeTransform's string
// with its kind spelled in front; 450 now, the keys' values the NodeTransform's strings, the Node's time of
// creation a number, and whether it carries a key told by the key's place in its list.
func TestClaimRegistryRetainsLittlePerNode(t *testing.T) {
	testheap.AtMost(t, "bytes per Node", claimsRetainedPerNode(t, 5000), 500)
}

// BenchmarkClaimRegistryRetained reports the heap the claim registry keeps per Node.
func BenchmarkClaimRegistryRetained(b *testing.B) {
	testheap.Report(b, "B/node", func() float64 { return claimsRetainedPerNode(b, 5000) })
}

// Three Nodes claim one machine: whichever of them is removed, the others keep their order, and the
// strongest left holds the machine.
func TestClaimRegistryRivals(t *testing.T) {
	t.Parallel()

	for _, removed := range []string{"a", "b", "c"} {
		t.Run(removed, func(t *testing.T) {
			t.Parallel()

			r := newClaimRegistry()
			claimOn := func(node string, created int64) Claim {
				return Claim{Node: node, Created: time.Unix(created, 0), Current: true, Keys: map[claimKey]bool{{kind: claimMachine, value: "uuid/u1"}: false}}
			}

			for i, node := range []string{"c", "b", "a"} {
				r.bind(claimOn(node, int64(3000-1000*i)))
			}

			r.remove(removed)

			var left []string
			for c := range r.claimants(claimKey{kind: claimMachine, value: "uuid/u1"}) {
				left = append(left, c.node)
			}

			want := map[string][]string{"a": {"c", "b"}, "b": {"c", "a"}, "c": {"b", "a"}}[removed]
			assert.Equal(t, want, left, "the claimants left, in the order they were bound")

			strongest := want[len(want)-1] // the older Node: "a" is the oldest, then "b"
			if removed == "a" {
				strongest = "b"
			}

			for _, node := range want {
				conflict, _, _ := r.bind(claimOn(node, map[string]int64{"a": 1000, "b": 2000, "c": 3000}[node]))
				if node == strongest {
					assert.Empty(t, conflict, node)
				} else {
					assert.Contains(t, conflict, "is Node "+strongest+"'s", node)
				}
			}
		})
	}
}

package csr

import (
	"fmt"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ids(ptrs []resource.Pointer) []string {
	out := make([]string, 0, len(ptrs))
	for _, p := range ptrs {
		out = append(out, p.ID())
	}

	return out
}

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// observed returns only the superseding request of observe.
func observed(x *requesterIndex, name, username string, created time.Time) string {
	by, _ := x.observe(name, username, created, "")

	return by
}

func TestRequesterIndexHead(t *testing.T) {
	t.Parallel()

	x := newRequesterIndex(func() time.Time { return t0 })

	// The first request is the head; seen again, it still is.
	assert.Empty(t, observed(x, "csr-b", "system:node:w1", t0))
	assert.Empty(t, observed(x, "csr-b", "system:node:w1", t0))

	// An older one is superseded by the head, and remembered until its decision says so.
	by, remembered := x.observe("csr-a", "system:node:w1", t0.Add(-time.Minute), "")
	assert.Equal(t, "csr-b", by)
	assert.True(t, remembered)

	// A newer one displaces the head, which is remembered as superseded by it.
	assert.Empty(t, observed(x, "csr-c", "system:node:w1", t0.Add(time.Minute)))
	assert.Equal(t, "csr-c", observed(x, "csr-b", "system:node:w1", t0))

	// Same second: the name orders.
	assert.Equal(t, "csr-c", observed(x, "csr-0", "system:node:w1", t0.Add(time.Minute)))
	assert.Empty(t, observed(x, "csr-d", "system:node:w1", t0.Add(time.Minute)))

	// Another requester is independent.
	assert.Empty(t, observed(x, "csr-x", "system:node:w2", t0.Add(-time.Hour)))

	// A change of w1 decides its head and the remembered ones again, never w2's.
	assert.Equal(t, []string{"csr-0", "csr-a", "csr-b", "csr-c", "csr-d"}, ids(x.requests("system:node:w1")))
	assert.Equal(t, []string{"csr-x"}, ids(x.requests("system:node:w2")))
	assert.Equal(t, []string{"csr-0", "csr-a", "csr-b", "csr-c", "csr-d", "csr-x"}, ids(x.requests("")))
	assert.Empty(t, x.requests("system:node:w3"))

	// Confirmed ones are no longer decided again on a change.
	x.confirm("csr-0", "system:node:w1")
	x.confirm("csr-a", "system:node:w1")
	x.confirm("csr-b", "system:node:w1")
	assert.Equal(t, []string{"csr-c", "csr-d"}, ids(x.requests("system:node:w1")))
	assert.Equal(t, 1, x.remembered)
}

// The memory outlives the superseding request: an older sibling decided again after the newest left is
// still superseded, while a request observed after it left was never pending beside it and is decided.
func TestRequesterIndexNewestLeaves(t *testing.T) {
	t.Parallel()

	x := newRequesterIndex(func() time.Time { return t0 })

	assert.Empty(t, observed(x, "csr-older", "system:node:w1", t0))
	assert.Empty(t, observed(x, "csr-newer", "system:node:w1", t0.Add(time.Second)))

	x.remove("csr-newer", "system:node:w1")
	assert.Equal(t, []string{"csr-older"}, ids(x.requests("system:node:w1")))

	assert.Equal(t, "csr-newer", observed(x, "csr-older", "system:node:w1", t0))
	assert.Empty(t, observed(x, "csr-a-later", "system:node:w1", t0.Add(time.Second)))
	assert.Equal(t, "csr-newer", observed(x, "csr-older", "system:node:w1", t0))

	// Everything leaves: nothing is kept.
	x.remove("csr-older", "system:node:w1")
	x.remove("csr-a-later", "system:node:w1")
	x.remove("csr-unknown", "system:node:w1")
	x.remove("csr-unknown", "system:node:w9")
	assert.Empty(t, x.by)
	assert.Zero(t, x.remembered)
}

// Beyond the bounds, superseded requests fold into the requester's floor: what is not newer than it stays
// superseded (erring on the side of waiting), and the floor is forgotten after a day.
func TestRequesterIndexBounds(t *testing.T) {
	t.Parallel()

	clock := t0
	x := newRequesterIndex(func() time.Time { return clock })
	x.limits.perRequester = 3
	x.limits.total = 5

	const user = "system:node:w1"

	// Newest first: every later one is older than the head.
	require.Empty(t, observed(x, "csr-99", user, t0.Add(99*time.Second)))

	for i := 1; i <= 10; i++ {
		assert.Equal(t, "csr-99", observed(x, fmt.Sprintf("csr-%02d", i), user, t0.Add(time.Duration(i)*time.Second)))
	}

	assert.Equal(t, 3, x.remembered)
	assert.Len(t, x.requests(user), 4, "the head and the three remembered")

	// A second requester fills the total.
	require.Empty(t, observed(x, "csr-w2-9", "system:node:w2", t0.Add(9*time.Second)))

	for i := 1; i <= 4; i++ {
		observed(x, fmt.Sprintf("csr-w2-%d", i), "system:node:w2", t0.Add(time.Duration(i)*time.Second))
	}

	assert.Equal(t, 5, x.remembered)

	// The newest leaves: the folded ones are still superseded, by the floor's superseder.
	x.remove("csr-99", user)
	assert.Equal(t, "csr-99", observed(x, "csr-10", user, t0.Add(10*time.Second)))
	assert.Equal(t, "csr-99", observed(x, "csr-00", user, t0), "older than the floor: waits")

	// A newer request is decided.
	assert.Empty(t, observed(x, "csr-fresh", user, t0.Add(time.Hour)))

	// After a day, the floor is forgotten; a requester left with nothing but an expired floor is pruned by
	// a later observation.
	x.remove("csr-fresh", user)

	for name := range x.by[user].superseded.by {
		x.confirm(name, user)
	}

	clock = clock.Add(26 * time.Hour)

	x.remove("csr-w2-9", "system:node:w2")

	for name := range x.by["system:node:w2"].superseded.by {
		x.confirm(name, "system:node:w2")
	}

	observed(x, "csr-w3", "system:node:w3", t0)
	assert.NotContains(t, x.by, user)
	assert.NotContains(t, x.by, "system:node:w2")
	assert.Zero(t, x.remembered)
}

// BenchmarkRequesterIndexFlood measures the bookkeeping of one decision while one node has thousands of
// pending requests: observing a request, and mapping a change of the flooding node's Node to the requests
// to decide again. Both are O(1) in the number of siblings.
func BenchmarkRequesterIndexFlood(b *testing.B) {
	for _, flood := range []int{16, 1600, 16000} {
		b.Run(fmt.Sprintf("siblings=%d", flood), func(b *testing.B) {
			x := newRequesterIndex(func() time.Time { return t0 })

			for i := range flood {
				// Each one displaces the previous, whose decision then says so.
				x.observe(fmt.Sprintf("csr-%06d", i), "system:node:flood", t0.Add(time.Duration(i)*time.Millisecond), "")
				x.confirm(fmt.Sprintf("csr-%06d", i-1), "system:node:flood")
			}

			b.ResetTimer()

			for i := range b.N {
				// A newer request of the flooder displaces the head, another node's request is observed,
				// and the flooder's Node changes.
				x.observe(fmt.Sprintf("csr-n%09d", i), "system:node:flood", t0.Add(time.Hour+time.Duration(i)), "")
				x.observe("csr-other", "system:node:other", t0, "")

				if len(x.requests("system:node:flood")) > 3 {
					b.Fatal("a change of the flooder's Node decides more than its head and the displaced one")
				}

				x.confirm(fmt.Sprintf("csr-n%09d", i-1), "system:node:flood")
			}
		})
	}
}

// A request of the same second as a head that was decided before it came is the newer one: a kubelet asks
// again at once when its approved request's certificate lacks names its Node gained, and the order of names
// would have that request superseded by the one it follows.
func TestRequesterIndexFollowsADecidedHead(t *testing.T) {
	t.Parallel()

	x := newRequesterIndex(func() time.Time { return t0 })

	assert.Empty(t, observed(x, "csr-z", "system:node:w1", t0))
	head, _ := x.head("system:node:w1")
	assert.Equal(t, "csr-z", head)

	// Undecided head: the name orders, as before.
	assert.Equal(t, "csr-z", observed(x, "csr-a", "system:node:w1", t0))

	// Decided head: the request that follows it is the head, and the decided one is remembered as
	// superseded by it.
	by, _ := x.observe("csr-b", "system:node:w1", t0, "csr-z")
	assert.Empty(t, by)
	head, _ = x.head("system:node:w1")
	assert.Equal(t, "csr-b", head)
	assert.Equal(t, "csr-b", observed(x, "csr-z", "system:node:w1", t0))

	// Only for the head named, and only within its second: an older request is still superseded.
	assert.Equal(t, "csr-b", observed(x, "csr-0", "system:node:w1", t0))

	by, _ = x.observe("csr-1", "system:node:w1", t0.Add(-time.Second), "csr-b")
	assert.Equal(t, "csr-b", by, "a request of an earlier second")

	by, _ = x.observe("csr-2", "system:node:w1", t0, "csr-other")
	assert.Equal(t, "csr-b", by, "a head that is not the one found decided")
}

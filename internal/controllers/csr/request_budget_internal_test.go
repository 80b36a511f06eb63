package csr

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestRequestBudgets(t *testing.T) {
	t.Parallel()

	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	b := newRequestBudgets()

	// A minute's worth of requests is decided at once; the next one waits for its token (20 s at 3 a minute).
	for _, name := range []string{"csr-1", "csr-2", "csr-3"} {
		assert.Zero(t, delay(b.take("system:node:flood", name, 3, start)), name)
	}

	assert.Equal(t, 20*time.Second, delay(b.take("system:node:flood", "csr-4", 3, start)))

	// A request already charged is decided again for free, and another requester has a bucket of its own.
	assert.Zero(t, delay(b.take("system:node:flood", "csr-3", 3, start)))
	assert.Zero(t, delay(b.take("system:node:quiet", "csr-q", 3, start)))

	// Halfway to its token, the request waits the other half; then it is decided.
	assert.Equal(t, 10*time.Second, delay(b.take("system:node:flood", "csr-4", 3, start.Add(10*time.Second))))
	assert.Zero(t, delay(b.take("system:node:flood", "csr-4", 3, start.Add(20*time.Second))))
	assert.Equal(t, 20*time.Second, delay(b.take("system:node:flood", "csr-5", 3, start.Add(20*time.Second))))

	// A clock that goes back adds no token.
	assert.Equal(t, 20*time.Second, delay(b.take("system:node:flood", "csr-5", 3, start)))

	// A rate of zero or less is one a minute, never a division by zero.
	assert.Zero(t, delay(b.take("system:node:zero", "csr-z1", 0, start)))
	assert.Equal(t, time.Minute, delay(b.take("system:node:zero", "csr-z2", 0, start)))
}

// Buckets that have refilled are dropped as other requesters take tokens: the memory follows the requesters
// active in the last minute.
func TestRequestBudgetsForgetRefilled(t *testing.T) {
	t.Parallel()

	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	b := newRequestBudgets()

	for _, user := range []string{"a", "b", "c", "d"} {
		delay(b.take(user, "csr-"+user, 10, start))
	}

	assert.Len(t, b.by, 4)

	// A minute later every bucket has refilled: each take looks at a few and drops those.
	later := start.Add(time.Minute)
	for i := range 64 {
		delay(b.take("e", "csr-e", 10, later.Add(time.Duration(i)*time.Millisecond)))
	}

	assert.Len(t, b.by, 1, "only the active requester's bucket is kept")
}

// delay is the first of what take returns.
func delay(d time.Duration, _ bool) time.Duration { return d }

// A requester is busy once it filed a second request within the refill window: its waiting requests are
// then decided again shortly, in case a newer one superseded them.
func TestRequestBudgetsBusy(t *testing.T) {
	t.Parallel()

	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	b := newRequestBudgets()

	_, busy := b.take("system:node:w1", "csr-1", 30, start)
	assert.False(t, busy, "one request")

	_, busy = b.take("system:node:w1", "csr-1", 30, start.Add(time.Second))
	assert.False(t, busy, "the same request again")

	_, busy = b.take("system:node:w1", "csr-2", 30, start.Add(time.Second))
	assert.True(t, busy, "a second request")

	_, busy = b.take("system:node:w1", "csr-3", 30, start.Add(5*time.Minute))
	assert.False(t, busy, "a request minutes later")
}

package k8ssink

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestEventCorrelator(t *testing.T) {
	t.Parallel()

	start := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	node := objectKey{kind: "Node", name: "n1", uid: "u1"}
	warning := eventKey{object: node, eventType: "Warning", reason: "Conflict", msg: "providerID held by n2"}

	type step struct {
		key    eventKey
		after  time.Duration // since the previous step
		want   eventAction
		count  int32 // for eventRepeat
		posted bool  // the recorder posted it (the correlator hears of it)
	}

	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a repeat within the window raises the count, one after it is new", []step{
			{key: warning, want: eventCreate, posted: true},
			{key: warning, after: time.Minute, want: eventRepeat, count: 2, posted: true},
			{key: warning, after: 9 * time.Minute, want: eventRepeat, count: 3, posted: true},
			{key: warning, after: eventRepeatWindow, want: eventCreate, posted: true},
		}},
		{"another message is another Event", []step{
			{key: warning, want: eventCreate, posted: true},
			{key: eventKey{object: node, eventType: "Warning", reason: "Conflict", msg: "providerID held by n3"}, want: eventCreate, posted: true},
		}},
		{"an Event that was never posted is not repeated", []step{
			{key: warning, want: eventCreate},
			{key: warning, want: eventCreate},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			c, now := newEventCorrelator(), start

			for i, s := range tc.steps {
				now = now.Add(s.after)
				got := c.decide(s.key, now)

				assert.Equal(t, s.want, got.action, "step %d", i)

				if s.want == eventRepeat {
					assert.Equal(t, s.count, got.count, "step %d", i)
					assert.Equal(t, "ev1", got.name, "step %d", i)
				}

				if s.posted {
					count := max(got.count, 1)
					c.posted(s.key, posted{name: "ev1", namespace: "default", count: count, first: start, last: now})
				}
			}
		})
	}
}

// TestEventCorrelatorObjectBudget: an object has eventObjectBurst Events at once, then one every
// eventObjectRefill; another object is not held back by it.
func TestEventCorrelatorObjectBudget(t *testing.T) {
	t.Parallel()

	c, now := newEventCorrelator(), time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	noisy := objectKey{kind: "Node", name: "noisy"}

	say := func(object objectKey, i int) eventAction {
		return c.decide(eventKey{object: object, eventType: "Warning", reason: "R", msg: fmt.Sprint(i)}, now).action
	}

	for i := range eventObjectBurst {
		assert.Equal(t, eventCreate, say(noisy, i), "event %d of the burst", i)
	}

	assert.Equal(t, eventDrop, say(noisy, 100), "beyond the burst")
	assert.Equal(t, eventCreate, say(objectKey{kind: "Node", name: "quiet"}, 0), "another object")

	now = now.Add(eventObjectRefill)
	assert.Equal(t, eventCreate, say(noisy, 101), "one more after the refill")
	assert.Equal(t, eventDrop, say(noisy, 102), "and only one")
}

func TestLRUForgetsTheLeastRecentlyUsed(t *testing.T) {
	t.Parallel()

	l := newLRU[string, int](2)
	l.put("a", 1)
	l.put("b", 2)
	l.get("a")
	l.put("c", 3)

	_, hasB := l.get("b")
	a, hasA := l.get("a")

	assert.False(t, hasB, "b was the least recently used")
	assert.True(t, hasA)
	assert.Equal(t, 1, a)

	l.remove("a")
	_, hasA = l.get("a")
	assert.False(t, hasA)
}

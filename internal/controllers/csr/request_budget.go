package csr

import (
	"sync"
	"time"
)

// requestBudgets throttles the requesters that file requests faster than a rate. Each requester has a
// token bucket that holds a minute's worth of requests and refills at the rate: the first decision in full
// of each of its requests (the parse, the signature, the facts) takes a token, and a request that finds
// none waits until one is due. A superseded request is denied without a token (that costs nothing), and a
// request is charged once, however often it is decided again: a kubelet that files requests in a loop gets
// one full decision per token, and every other requester keeps its own bucket.
//
// A bucket that has refilled is the same as none, and is dropped: a few are looked at on every take, so
// the memory follows the requesters active in the last minute or so.
type requestBudgets struct {
	by map[string]*requestBudget
	mu sync.Mutex
}

// requestBudget is one requester's bucket.
type requestBudget struct {
	// at is when tokens was last brought up to date.
	at time.Time
	// charged is the request that took the last token: deciding it again costs nothing.
	charged string
	tokens  float64
}

// budgetSweep is how many other requesters a take looks at for a bucket that has refilled.
const budgetSweep = 2

func newRequestBudgets() *requestBudgets {
	return &requestBudgets{by: map[string]*requestBudget{}}
}

// take charges request name of username for its decision in full at now, at perMinute requests a minute
// (at least one). It returns zero when the request may be decided now, or else how long until a token is
// due; and whether the requester filed more than one request in about the last minute (its bucket is not
// full but for this request), when a newer request may soon supersede this one.
func (b *requestBudgets) take(username, name string, perMinute int, now time.Time) (time.Duration, bool) {
	rate := float64(max(perMinute, 1))

	b.mu.Lock()
	defer b.mu.Unlock()

	b.sweepLocked(username, rate, now)

	budget := b.by[username]
	if budget == nil {
		budget = &requestBudget{at: now, tokens: rate}
		b.by[username] = budget
	}

	budget.refill(rate, now)

	switch {
	case budget.charged == name:
		return 0, budget.tokens < rate-1
	case budget.tokens >= 1:
		budget.tokens--
		budget.charged = name

		return 0, budget.tokens < rate-1
	}

	return time.Duration((1 - budget.tokens) / rate * float64(time.Minute)), true
}

// refill brings the bucket up to now: rate tokens a minute, at most rate. A clock that went back adds
// nothing.
func (r *requestBudget) refill(rate float64, now time.Time) {
	if elapsed := now.Sub(r.at); elapsed > 0 {
		r.tokens = min(rate, r.tokens+elapsed.Minutes()*rate)
	}

	r.at = now
}

// sweepLocked looks at a few requesters other than username (Go's map iteration starts at a random place)
// and drops those whose bucket has refilled.
func (b *requestBudgets) sweepLocked(username string, rate float64, now time.Time) {
	seen := 0

	for other, budget := range b.by {
		if seen >= budgetSweep {
			return
		}

		seen++

		if other != username && budget.tokens+now.Sub(budget.at).Minutes()*rate >= rate {
			delete(b.by, other)
		}
	}
}

package keyed

import "time"

// NewWorkersWithBackoff is NewWorkers with the backoff of failed keys, for the tests of the retries.
func NewWorkersWithBackoff[K comparable](limit int, backoff func(failures int) time.Duration) *Workers[K] {
	return newWorkers[K](limit, backoff)
}

// Len is the number of keys the workers' queue holds: queued, running or waiting.
func (w *Workers[K]) Len() int {
	return w.queue.Len()
}

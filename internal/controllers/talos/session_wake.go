package talos

import "sync"

// waking runs a session's work due (a probe, a read of PlatformMetadata, a change of its Node's condition)
// on a goroutine started when a timer or the Node's condition wakes the session, and ended with the work:
// thousands of idle sessions hold no goroutine for it, and one machine slow to answer a probe delays no
// other. A wake while the work runs makes it run once more when done: none is lost, and the work of one
// session never runs twice at once.
type waking struct {
	// work is the work due; it looks for itself at what is due.
	work func()

	mu      sync.Mutex
	running bool
	again   bool
	stopped bool
	done    sync.WaitGroup
}

// wake runs the work, unless waking stopped.
func (w *waking) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()

	switch {
	case w.stopped:
		return
	case w.running:
		w.again = true

		return
	}

	w.running = true

	w.done.Add(1)

	go w.run()
}

func (w *waking) run() {
	defer w.done.Done()

	for {
		w.work()

		w.mu.Lock()

		if !w.again || w.stopped {
			w.running = false
			w.mu.Unlock()

			return
		}

		w.again = false
		w.mu.Unlock()
	}
}

// stopWaking lets no wake run the work any more, and waits for the work running.
func (w *waking) stopWaking() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()

	w.done.Wait()
}

package main

import (
	"runtime"
	"sync"
)

// descriptorSample is how many goroutines goroutineDescriptorBytes starts: enough that the descriptors
// the process already had for reuse, and the heap's noise, are lost in the figure.
const descriptorSample = 10000

// goroutineDescriptorBytes measures the live heap the Go runtime keeps for each goroutine of a peak once
// they all ended: it keeps the descriptor of every goroutine that ever ran (for reuse, never freed), and
// the list of them. It starts n goroutines at once, ends them, and returns the growth of the live heap per
// goroutine. The bench runs it in its own process, built by the same toolchain as the host, before it does
// anything else: the host's figures would carry the sample's descriptors otherwise.
func goroutineDescriptorBytes(n int) float64 {
	before := liveHeap()

	var started, ended sync.WaitGroup

	release := make(chan struct{})

	for range n {
		started.Add(1)
		ended.Go(func() {
			started.Done()
			<-release
		})
	}

	started.Wait()
	close(release)
	ended.Wait()

	return (liveHeap() - before) / float64(n)
}

// liveHeap is the bytes of the heap's live objects, after a collection.
func liveHeap() float64 {
	runtime.GC()

	var ms runtime.MemStats

	runtime.ReadMemStats(&ms)

	return float64(ms.HeapAlloc)
}

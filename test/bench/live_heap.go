package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// readLiveHeap reads talos-ccm's live heap: the bytes of its heap objects right after a collection, which
// its heap profile's endpoint (served with --profiling) runs when asked to with gc=1. The heap in use that
// /metrics gives also holds the garbage not collected yet, which moves with where a collection falls: the
// live heap is what grows when something is kept.
func readLiveHeap(addr string) (float64, error) {
	return readEndpoint(addr, "/debug/pprof/heap?gc=1&debug=1", parseHeapAlloc)
}

// parseHeapAlloc finds HeapAlloc in the runtime.MemStats that a heap profile in text ends with
// ("# HeapAlloc = 1234").
func parseHeapAlloc(r io.Reader) (float64, error) {
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 1<<20), 1<<20)

	for scanner.Scan() {
		value, ok := strings.CutPrefix(scanner.Text(), "# HeapAlloc = ")
		if !ok {
			continue
		}

		bytes, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return 0, fmt.Errorf("failed to parse the heap profile's HeapAlloc %q: %w", value, err)
		}

		return bytes, nil
	}

	if err := scanner.Err(); err != nil {
		return 0, fmt.Errorf("failed to read the heap profile: %w", err)
	}

	return 0, fmt.Errorf("failed to find HeapAlloc in the heap profile")
}

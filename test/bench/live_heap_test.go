package main

import (
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseHeapAlloc(t *testing.T) {
	t.Parallel()

	heap, err := parseHeapAlloc(strings.NewReader("heap profile: 1: 2 [3: 4] @ heap/1048576\n\n# runtime.MemStats\n# Alloc = 5\n# TotalAlloc = 9\n# HeapAlloc = 123456\n# HeapSys = 9\n"))
	require.NoError(t, err)
	assert.InDelta(t, 123456, heap, 0)

	_, err = parseHeapAlloc(strings.NewReader("# HeapSys = 9\n"))
	require.Error(t, err)

	_, err = parseHeapAlloc(strings.NewReader("# HeapAlloc = lots\n"))
	require.Error(t, err)
}

// TestReadLiveHeap reads the live heap from the endpoint Go's net/http/pprof serves, as talos-ccm serves it
// with --profiling, so that a change of its text format fails here and not in a bench run.
func TestReadLiveHeap(t *testing.T) {
	t.Parallel()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)

	srv := &http.Server{Handler: mux} //nolint:gosec // a test server on localhost

	go srv.Serve(lis) //nolint:errcheck // ends with Close

	t.Cleanup(func() { srv.Close() }) //nolint:errcheck

	heap, err := readLiveHeap(lis.Addr().String())
	require.NoError(t, err)

	var stats runtime.MemStats
	runtime.ReadMemStats(&stats)

	assert.Positive(t, heap)
	assert.LessOrEqual(t, heap, float64(stats.HeapSys), "the live heap fits in the heap's memory")
}

package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestGoroutineDescriptorBytes: the descriptors of a goroutine peak stay in the heap once the goroutines
// ended, a few hundred bytes each (a runtime g, about 440 bytes in Go 1.26, and its place in the list of
// them); a measure that let them go, or counted their stacks, would be far off.
func TestGoroutineDescriptorBytes(t *testing.T) { //nolint:paralleltest // It measures the process's heap.
	size := goroutineDescriptorBytes(descriptorSample)
	assert.Greater(t, size, 256.0)
	assert.Less(t, size, 1024.0)
	t.Logf("%.0f bytes per goroutine of the peak", size)
}

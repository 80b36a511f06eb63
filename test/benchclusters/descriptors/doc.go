// Package descriptors measures, for make bench-clusters, the goroutine descriptors the Go runtime keeps:
// it keeps the descriptor (a runtime g) of every goroutine a process ever ran at once, for reuse, in the
// heap, and never frees them; a host whose clusters were all removed keeps those of its busiest moment.
package descriptors

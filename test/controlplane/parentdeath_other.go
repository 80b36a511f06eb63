//go:build !linux

package main

// stopWithParent does nothing where the kernel cannot signal a child on its parent's death: there,
// stop the control plane by signalling this process rather than `go run`.
func stopWithParent() error {
	return nil
}

//go:build !linux

package parentdeath

// Enable does nothing where the kernel cannot signal a child on its parent's death.
func Enable() {}

//go:build linux

package main

import (
	"fmt"
	"syscall"
)

// stopWithParent makes the kernel send SIGTERM to this process when its parent exits. `go run`
// dies on SIGTERM without passing it on, so without this, terminating `go run ./test/controlplane`
// would orphan the control plane instead of stopping it.
func stopWithParent() error {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		return fmt.Errorf("failed to request a signal on parent death: %w", errno)
	}

	return nil
}

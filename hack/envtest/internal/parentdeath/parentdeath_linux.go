//go:build linux

package parentdeath

import (
	"fmt"
	"os"
	"syscall"
)

// Enable makes the kernel send SIGTERM to this process when its parent exits, which etcd and
// kube-apiserver handle as a graceful shutdown.
//
// The kernel tracks the parent thread rather than the parent process; a Go parent keeps its
// threads for its whole life, so the two only differ for a parent that forks from a goroutine
// locked to an OS thread and lets that goroutine exit.
func Enable() {
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGTERM), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "failed to request a signal on parent death: %v\n", errno)
	}
}

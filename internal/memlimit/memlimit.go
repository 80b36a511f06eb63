// Package memlimit sets the Go runtime's soft memory limit from the container's memory limit, so that the
// garbage collector works harder before the kernel's OOM killer would, instead of letting the heap grow
// to twice its live size. GOMEMLIMIT, when set, always wins.
package memlimit

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// Ratio is the share of the container's memory limit given to the Go runtime; the rest is left to memory
// the runtime does not manage (sqlite's page cache, thread stacks) and to headroom.
const Ratio = 0.9

// cgroupFiles are where the memory limit is read from: cgroup v2, then v1.
var cgroupFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// Source says where the limit in force comes from.
type Source string

// The sources of the limit.
const (
	SourceEnv    Source = "GOMEMLIMIT"
	SourceCgroup Source = "cgroup"
	SourceNone   Source = "none"
)

// Apply sets the soft memory limit to Ratio of the container's memory limit unless GOMEMLIMIT is set or
// no limit is found. It returns the limit in force (0: none) and where it comes from.
func Apply() (int64, Source, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return debug.SetMemoryLimit(-1), SourceEnv, nil
	}

	limit, err := readCgroupLimit(os.ReadFile)
	if err != nil || limit == 0 {
		return 0, SourceNone, err
	}

	soft := Soft(limit)
	debug.SetMemoryLimit(soft)

	return soft, SourceCgroup, nil
}

// Soft is the soft limit for a container memory limit in bytes.
func Soft(limit int64) int64 {
	return int64(float64(limit) * Ratio)
}

// readCgroupLimit returns the first memory limit found in the cgroup files, 0 when there is none.
func readCgroupLimit(read func(string) ([]byte, error)) (int64, error) {
	for _, path := range cgroupFiles {
		data, err := read(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}

		if err != nil {
			return 0, fmt.Errorf("failed to read the memory limit from %s: %w", path, err)
		}

		limit, err := ParseLimit(string(data))
		if err != nil {
			return 0, fmt.Errorf("failed to read the memory limit from %s: %w", path, err)
		}

		return limit, nil
	}

	return 0, nil
}

// unlimitedV1 is at or above what cgroup v1 reports for "no limit" (the largest page-aligned int64).
const unlimitedV1 = int64(1) << 62

// ParseLimit reads a cgroup memory limit: a number of bytes, or "max" (cgroup v2) and huge numbers
// (cgroup v1) for none, which are 0.
func ParseLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, nil
	}

	limit, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not a memory limit: %q", s)
	}

	if limit <= 0 || limit >= unlimitedV1 {
		return 0, nil
	}

	return limit, nil
}

package main

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCPUBetween: the CPU a window took goes to the host, the apiservers, their etcds and the rest, by
// process; a process that started meanwhile counts whole.
func TestCPUBetween(t *testing.T) {
	t.Parallel()

	const hostPID = 10

	before := machineCPU{
		busy: 10 * time.Second, capacity: 40 * time.Second,
		byPID:  map[int]time.Duration{hostPID: time.Second, 20: 2 * time.Second, 21: time.Second, 30: time.Second, 40: time.Second},
		byName: map[int]string{hostPID: "host", 20: "kube-apiserver", 21: "kube-apiserver", 30: "etcd", 40: "kworker/0:1-events"},
	}
	after := machineCPU{
		busy: 13 * time.Second, capacity: 44 * time.Second,
		byPID: map[int]time.Duration{
			hostPID: 2 * time.Second, 20: 2500 * time.Millisecond, 21: 2 * time.Second, 30: 1200 * time.Millisecond,
			40: 1100 * time.Millisecond, 50: 300 * time.Millisecond,
		},
		// A kernel worker's name says what it works on at the time: the process is the same.
		byName: map[int]string{hostPID: "host", 20: "kube-apiserver", 21: "kube-apiserver", 30: "etcd", 40: "kworker/0:1-mm_percpu_wq", 50: "benchclusters"},
	}

	got := cpuBetween(before, after, 2*time.Second, hostPID)

	assert.Equal(t, burstCPU{
		wall: 2 * time.Second, busy: 3 * time.Second, capacity: 4 * time.Second,
		host: time.Second, apiservers: 1500 * time.Millisecond, etcd: 200 * time.Millisecond, others: 400 * time.Millisecond,
	}, got)
	assert.Equal(t, "75% of the processors busy over 2.00 s: the host 1.00 s, the apiservers 1.50 s, their etcds 0.20 s, the rest 0.40 s", got.String())
}

// TestReadMachineCPU reads this machine: the processors' time grows, and this process is among those read.
func TestReadMachineCPU(t *testing.T) {
	t.Parallel()

	m, err := readMachineCPU()
	require.NoError(t, err)

	assert.Positive(t, m.capacity)
	assert.LessOrEqual(t, m.busy, m.capacity)
	assert.Contains(t, m.byPID, os.Getpid())
}

func TestBusyShare(t *testing.T) {
	t.Parallel()

	assert.InDelta(t, 0.25, burstCPU{busy: time.Second, capacity: 4 * time.Second}.busyShare(), 1e-9)
	assert.Zero(t, burstCPU{busy: time.Second}.busyShare(), "no capacity read: nothing to share")
}

// TestWaitQuietReadsASecond: past its wait, waitQuiet returns the machine's use over the last second it
// watched.
func TestWaitQuietReadsASecond(t *testing.T) {
	t.Parallel()

	used, err := waitQuiet(t.Context(), 0, os.Getpid())
	require.NoError(t, err)

	assert.GreaterOrEqual(t, used.wall, time.Second)
	assert.Positive(t, used.capacity, "the processors' time over the second")
	assert.LessOrEqual(t, used.busy, used.capacity)
}

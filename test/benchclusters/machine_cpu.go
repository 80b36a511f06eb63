package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// machineCPU is the CPU time the machine's processors and processes used, from /proc: what the host, the
// apiservers and their etcds each took while the burst's clusters started, and whether the processors had
// any left.
type machineCPU struct {
	// busy and capacity are the time the machine's processors ran anything, and could have, summed over
	// them (/proc/stat).
	busy, capacity time.Duration
	// byPID is each process's CPU time (user and system), and byName its command.
	byPID  map[int]time.Duration
	byName map[int]string
}

// readMachineCPU reads the machine's CPU times.
func readMachineCPU() (machineCPU, error) {
	m := machineCPU{byPID: map[int]time.Duration{}, byName: map[int]string{}}

	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return m, fmt.Errorf("failed to read the machine's CPU time: %w", err)
	}

	// "cpu  user nice system idle iowait irq softirq steal ...": idle and iowait are the unused time.
	line, _, _ := strings.Cut(string(stat), "\n")
	for i, field := range strings.Fields(line)[1:] {
		ticks, err := strconv.ParseInt(field, 10, 64)
		if err != nil {
			return m, fmt.Errorf("failed to parse /proc/stat: %w", err)
		}

		d := time.Duration(ticks) * time.Second / clockTicks
		if i < 8 { // guest time is counted in user time already
			m.capacity += d

			if i != 3 && i != 4 {
				m.busy += d
			}
		}
	}

	entries, err := os.ReadDir("/proc")
	if err != nil {
		return m, fmt.Errorf("failed to list the machine's processes: %w", err)
	}

	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}

		name, cpu, err := procStat(pid)
		if err != nil {
			continue // ended meanwhile
		}

		m.byPID[pid], m.byName[pid] = cpu, name
	}

	return m, nil
}

// burstCPU is what the machine's processes took between two readings, by role.
type burstCPU struct {
	wall                           time.Duration
	busy, capacity                 time.Duration
	host, apiservers, etcd, others time.Duration
}

// cpuBetween returns what the machine used from before to after, over wall; hostPID is the host's process.
// A process that started meanwhile counts whole.
func cpuBetween(before, after machineCPU, wall time.Duration, hostPID int) burstCPU {
	b := burstCPU{wall: wall, busy: after.busy - before.busy, capacity: after.capacity - before.capacity}

	for pid, cpu := range after.byPID {
		used := cpu - before.byPID[pid]

		switch {
		case pid == hostPID:
			b.host += used
		case after.byName[pid] == "kube-apiserver":
			b.apiservers += used
		case after.byName[pid] == "etcd":
			b.etcd += used
		default:
			b.others += used
		}
	}

	return b
}

// busyShare is the share of the processors' time they were busy.
func (b burstCPU) busyShare() float64 {
	if b.capacity <= 0 {
		return 0
	}

	return b.busy.Seconds() / b.capacity.Seconds()
}

// String says where the machine's CPU went.
func (b burstCPU) String() string {
	return fmt.Sprintf("%.0f%% of the processors busy over %s: the host %.2f s, the apiservers %.2f s, their etcds %.2f s, the rest %.2f s",
		100*b.busyShare(), seconds(b.wall), b.host.Seconds(), b.apiservers.Seconds(), b.etcd.Seconds(), b.others.Seconds())
}

// quietBusy is the share of the processors under which the machine counts as quiet.
const quietBusy = 0.25

// waitQuiet waits until the machine's processors were busy under quietBusy over a second, or d passed, and
// returns what the machine used over the last second it watched: the clusters started before may still be
// at work (their informers, their Nodes' second passes) when the last of their Nodes is initialized.
func waitQuiet(ctx context.Context, d time.Duration, hostPID int) (burstCPU, error) {
	deadline := time.Now().Add(d)

	before, err := readMachineCPU()
	if err != nil {
		return burstCPU{}, err
	}

	for {
		start := time.Now()
		sleep(ctx, time.Second)

		after, err := readMachineCPU()
		if err != nil {
			return burstCPU{}, err
		}

		used := cpuBetween(before, after, time.Since(start), hostPID)

		if used.busyShare() < quietBusy || !time.Now().Before(deadline) || ctx.Err() != nil {
			return used, ctx.Err()
		}

		// The next second starts where this one ended.
		before = after
	}
}

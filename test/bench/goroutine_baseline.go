package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

const (
	// baselineSteady is how many reads in a row, baselinePoll apart, the baseline's goroutines must not move.
	baselineSteady = 4
	baselinePoll   = 500 * time.Millisecond
	// baselineLimit bounds the baseline's wait for its leadership and a steady count.
	baselineLimit = time.Minute
)

// baselineGoroutines counts the goroutines of a talos-ccm with no Node to care for: started on the control
// plane before any Node exists (with a state and a Lease of its own), read once it leads and its count has
// held still, then stopped. In it is what talos-ccm runs whatever the fleet's size (its informers,
// controllers, servers, clients); the goroutines after the initialization minus it are the fleet's.
func baselineGoroutines(ctx context.Context, opts options, kubeconfig, work, logPath string, args ...string) (float64, error) {
	work = filepath.Join(work, "baseline")
	if err := os.MkdirAll(work, 0o755); err != nil {
		return 0, err
	}

	metricsAddr, err := freeAddress()
	if err != nil {
		return 0, err
	}

	args = append(args, "--leader-elect-resource-name", "talos-ccm-bench-baseline")

	exited, stop, err := startCCM(ccmCommand(ctx, opts, kubeconfig, work, metricsAddr, args...), logPath)
	if err != nil {
		return 0, err
	}

	defer stop()

	deadline := time.After(baselineLimit)
	last, steady := -1.0, 0

	for {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-exited:
			return 0, fmt.Errorf("talos-ccm exited before its baseline was read (see %s)", logPath)
		case <-deadline:
			return 0, fmt.Errorf("talos-ccm's goroutines did not hold still within %s of its start (last %.0f)", baselineLimit, last)
		case <-time.After(baselinePoll):
		}

		// Until it listens, a read fails; until it leads, its controllers have not started.
		series, err := scrape(metricsAddr)
		if err != nil || sum(series, "talos_ccm_leader_election_master") != 1 {
			continue
		}

		now := sum(series, "go_goroutines")
		if now != last {
			last, steady = now, 0

			continue
		}

		if steady++; steady >= baselineSteady {
			return now, nil
		}
	}
}

// perMachine is the goroutines after the initialization beyond the baseline, per node.
func perMachine(goroutines, baseline float64, nodes int) float64 {
	if nodes == 0 {
		return 0
	}

	return (goroutines - baseline) / float64(nodes)
}

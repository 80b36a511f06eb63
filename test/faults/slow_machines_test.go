//go:build faults

package faults_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/talos-ccm/talos-ccm/internal/talossim"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// slowLatency is how long a slow machine takes to answer every Talos API request.
const slowLatency = 3 * time.Second

// TestSlowMachinesDoNotDelayOthers measures how long Nodes take to be initialized (from their creation to
// the removal of the uninitialized taint, as their kubelets see it): first for a baseline set of machines
// that all answer at once, then for as many more machines, a tenth of which answer every request in 3
// seconds. The other nine tenths must initialize about as fast as the baseline (p90 within twice the
// baseline's p90 plus 2 seconds, a bound loose enough for a busy two-core machine), and the slow ones must
// be initialized too.
func TestSlowMachinesDoNotDelayOthers(t *testing.T) {
	const (
		prefix = "slow"
		count  = 200
	)

	c := sharedCluster()
	machines := machinesFor(prefix, 2*count, 41)
	baseline, mixed := machines[:count], machines[count:]

	var slow, fast []talossim.Machine

	for i, m := range mixed {
		if i%10 == 3 {
			slow = append(slow, m)
		} else {
			fast = append(fast, m)
		}
	}

	cleanupPrefix(t, c, prefix)

	fleet, srv := startSim(t, machines)
	nodes := watchNodes(t, c, prefix)

	startCCM(t, "ccm", ccmConfig{kubeconfig: c.kubeconfig(t), talosconfig: srv.TalosconfigPath(), race: true})

	baselineKubelets := joinKubelets(t, c, baseline)
	nodes.waitNodes(t, machineNames(baseline), 2*time.Minute, "initialized (baseline)", isInitialized)

	for _, m := range slow {
		if err := fleet.SetLatency(m.Name, slowLatency); err != nil {
			t.Fatal(err)
		}
	}

	mixedKubelets := joinKubelets(t, c, mixed)
	nodes.waitNodes(t, machineNames(mixed), 2*time.Minute, "initialized (a tenth of them slow)", isInitialized)

	base := initializationDurations(t, baselineKubelets, baseline)
	others := initializationDurations(t, mixedKubelets, fast)
	slowOnes := initializationDurations(t, mixedKubelets, slow)

	bound := 2*percentile(base, 90) + 2*time.Second

	t.Logf("time to initialize, p50 / p90 / max: baseline %s / %s / %s; with slow machines around %s / %s / %s; slow machines %s / %s / %s",
		percentile(base, 50), percentile(base, 90), percentile(base, 100),
		percentile(others, 50), percentile(others, 90), percentile(others, 100),
		percentile(slowOnes, 50), percentile(slowOnes, 90), percentile(slowOnes, 100))

	if p90 := percentile(others, 90); p90 > bound {
		t.Errorf("with a tenth of the machines slow, the others' p90 is %s, over the bound of %s (twice the baseline's p90 plus 2s)", p90, bound)
	}

	// The slow machines are read: their facts take a few round trips of 3 seconds.
	if p := percentile(slowOnes, 50); p < slowLatency {
		t.Errorf("the slow machines' p50 is %s, under their latency of %s: were they slow at all?", p, slowLatency)
	}
}

// initializationDurations returns, for each machine, how long its Node took from its creation to its
// initialization, as its kubelet saw them.
func initializationDurations(t *testing.T, kubelets *talossim.Kubelets, machines []talossim.Machine) []time.Duration {
	t.Helper()

	// The kubelet sees the initialization through its own watch: wait for it.
	durations := map[string]time.Duration{}

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "every kubelet sees its Node initialized", func(context.Context) error {
		return testenv.Every(machineNames(machines), func(name string) error {
			times, ok := kubelets.Times(name)
			if !ok || times.Initialized.IsZero() {
				return errNotYet
			}

			durations[name] = times.Initialized.Sub(times.Created)

			return nil
		})
	})

	out := make([]time.Duration, 0, len(machines))
	for _, m := range machines {
		out = append(out, durations[m.Name])
	}

	return out
}

// percentile returns the p-th percentile (nearest rank) of the durations.
func percentile(durations []time.Duration, p int) time.Duration {
	if len(durations) == 0 {
		return 0
	}

	sorted := slices.Clone(durations)
	slices.Sort(sorted)

	rank := max((p*len(sorted)+99)/100, 1)

	return sorted[rank-1].Round(10 * time.Millisecond)
}

//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// talosOutage is how long the Talos endpoint is down.
const talosOutage = 30 * time.Second

// TestTalosEndpointOutage takes the whole Talos API endpoint down for 30 seconds (every connection and stream
// cut, new connections refused) after a first set of Nodes is initialized, while a second set joins. The
// Nodes initialized before keep everything talos-ccm applied to them (no write takes a label, the providerID
// or an address away); the Nodes that joined during the outage are initialized once the endpoint is back,
// and their certificate requests approved; talos-ccm does not restart.
func TestTalosEndpointOutage(t *testing.T) {
	const prefix = "talosdown"

	c := sharedCluster()
	machines := machinesFor(prefix, 120, 31)
	before, during := machines[:60], machines[60:]

	cleanupPrefix(t, c, prefix)

	_, srv := startSim(t, machines)
	nodes := watchNodes(t, c, prefix)
	csrs := watchCSRs(t, c)

	ccm := startCCM(t, "ccm", ccmConfig{kubeconfig: c.kubeconfig(t), talosconfig: srv.TalosconfigPath(), race: true})
	beforeKubelets := joinKubelets(t, c, before)

	nodes.waitNodes(t, machineNames(before), 2*time.Minute, "initialized before the outage", isInitialized)
	csrs.waitVerdicts(t, kubeletRequests(t, beforeKubelets, machineNames(before), time.Minute), verdictApproved, time.Minute)

	applied := map[string]*corev1.Node{}
	for _, name := range machineNames(before) {
		applied[name] = nodes.node(name).DeepCopy()
	}

	srv.Pause()
	down := time.Now()

	duringKubelets := joinKubelets(t, c, during)

	// The outage is the fault under test: it lasts talosOutage, and no Node that joined meanwhile may be
	// initialized without its Talos facts. A failure is reported, and the test goes on to the recovery.
	if err := testenv.HoldFor(t.Context(), talosOutage-time.Since(down), 200*time.Millisecond, "no Node initialized without its Talos facts",
		func(context.Context) error {
			if n := nodes.countInitialized(machineNames(during)); n > 0 {
				return fmt.Errorf("%d Nodes initialized", n)
			}

			return nil
		}); err != nil {
		t.Error(err)
	}

	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}

	up := time.Now()

	t.Logf("Talos endpoint down for %s", up.Sub(down).Round(100*time.Millisecond))

	// Every Talos session fails while the endpoint is down, and some a little after, until they reconnect.
	ccm.expectErrorsBetween(down, up.Add(time.Minute), "the Talos endpoint was down")

	nodes.waitNodes(t, machineNames(during), 2*time.Minute, "initialized after the outage", isInitialized)
	csrs.waitVerdicts(t, kubeletRequests(t, duringKubelets, machineNames(during), time.Minute), verdictApproved, time.Minute)

	ccm.requireRunning()

	for name, node := range applied {
		for _, problem := range undone(node, nodes.node(name)) {
			t.Errorf("%s: %s", name, problem)
		}
	}

	t.Logf("%d approved requests audited", csrs.auditApprovals(t, nodes, prefix))
	nodes.checkProviderIDs(t, machines)
	nodes.checkNothingUndone(t)
}

//go:build faults

package faults_test

import (
	"testing"
	"time"
)

// TestAPIServerRestart restarts the kube-apiserver (same address, certificates and etcd data) while talos-ccm
// initializes Nodes. talos-ccm rides it out without a restart of its own: the Nodes that were joining and
// those that join after the restart are initialized, their kubelets' certificate requests approved, and
// nothing applied before is undone.
//
// Leader election is off: with it, an outage longer than the renew deadline (10s by default) ends the
// leader's process on purpose, as kube-controller-manager's, and the Deployment starts it again.
func TestAPIServerRestart(t *testing.T) {
	const prefix = "apirestart"

	cp := startRestartableControlPlane(t)
	machines := machinesFor(prefix, 200, 23)
	early, late := machines[:150], machines[150:]

	_, srv := startSim(t, machines)
	nodes := watchNodes(t, cp.cluster, prefix)
	csrs := watchCSRs(t, cp.cluster)

	ccm := startCCM(t, "ccm", ccmConfig{kubeconfig: cp.kubeconfig(t), talosconfig: srv.TalosconfigPath(), race: true})
	earlyKubelets := joinKubelets(t, cp.cluster, early)

	nodes.waitInitializedCount(t, machineNames(early), 30, 2*time.Minute, "talos-ccm initializes the first Nodes")

	initialized := nodes.countInitialized(machineNames(early))
	stopped, started := cp.restartAPIServer(t, 5*time.Second)

	t.Logf("apiserver stopping, down and starting for %s, from when %d of %d Nodes were initialized",
		started.Sub(stopped).Round(100*time.Millisecond), initialized, len(early))

	// Its clients fail while it is down, and a little after (requests in flight, watches re-established).
	ccm.expectErrorsBetween(stopped, started.Add(30*time.Second), "the apiserver was down")

	lateKubelets := joinKubelets(t, cp.cluster, late)

	nodes.waitNodes(t, machineNames(machines), 3*time.Minute, "initialized", isInitialized)

	requests := append(kubeletRequests(t, earlyKubelets, machineNames(early), time.Minute),
		kubeletRequests(t, lateKubelets, machineNames(late), time.Minute)...)
	csrs.waitVerdicts(t, requests, verdictApproved, 2*time.Minute)

	ccm.requireRunning()

	if n := ccm.countLog("talos-ccm started"); n != 1 {
		t.Errorf("talos-ccm started %d times, want once", n)
	}

	t.Logf("%d approved requests audited", csrs.auditApprovals(t, nodes, prefix))
	nodes.checkProviderIDs(t, machines)
	nodes.checkNothingUndone(t)
}

package e2e_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	ccmpkg "github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// TestAttackForgedNotReadyTime: with --delete-stale-nodes, a kubelet credential posts its own Node's Ready
// condition as False with a lastTransitionTime an hour old, and points its provided-node-ip annotation at
// another machine, which names itself another node. Both are the kubelet's claims (DESIGN.md, section 5a):
// the grace is measured from when talos-ccm saw the Node turn NotReady, and what answers at an address other
// than the one where the Node's machine answered as it is no evidence. The Node is not deleted, within the
// grace or after it; a kubelet credential cannot delete its Node itself, and must not have talos-ccm do it.
func TestAttackForgedNotReadyTime(t *testing.T) {
	const grace = 6 * time.Second

	socket := filepath.Join(socketDir(t), "ccm.sock")
	victim, own, kubelets := attackScene(t, "lcforge", 64, app.Options{Pipeline: lifecycleOptions(ccmpkg.NodeLifecycleOptions{DeleteStaleNodes: true, StaleNodeGrace: grace}), APIListen: socket})
	attacker := own.Name
	st := stateClient(t, socket)

	waitLifecycle(t, st, attacker, "records the machine's identity", func(v *specs.NodeLifecycleSpec) bool {
		return v.GetRecordedMachineUuid() != ""
	})

	w := watchNode(t, attacker)
	posted := forgeNotReady(t, attacker, victim)

	// The Node stays past the grace, however it is measured, with room for probes and decisions.
	deletedAt := awaitNodeDeleted(t, w, posted.Add(2*grace), 2*grace+outcomeTimeout)
	require.True(t, deletedAt.IsZero(), "the Node was deleted %s after the forged NotReady", deletedAt.Sub(posted).Round(time.Millisecond))

	verdict := waitLifecycle(t, st, attacker, "sees the forged NotReady at another machine's address", func(v *specs.NodeLifecycleSpec) bool {
		return !v.GetNodeReady() && strings.Contains(v.GetReason(), "what answers there is no evidence")
	})
	require.False(t, verdict.GetDelete(), verdict.GetReason())

	observed := verdict.GetNotReadyObserved().AsTime()
	assert.False(t, observed.Before(posted), "talos-ccm's observation %s precedes the write %s", observed, posted)
	assert.False(t, verdict.GetNotReadySince().AsTime().Before(observed), "the grace starts before talos-ccm's observation: %s", verdict)

	assertVictimIntact(t, kubelets, victim)
}

// awaitNodeDeleted reads the watch of one Node until the Node is deleted, and returns when; it returns the
// zero time when until (if not zero) comes first. The test fails when the watch ends, or after timeout.
func awaitNodeDeleted(t *testing.T, w watch.Interface, until time.Time, timeout time.Duration) time.Time {
	t.Helper()

	var stop <-chan time.Time

	if !until.IsZero() {
		timer := time.NewTimer(time.Until(until))
		defer timer.Stop()

		stop = timer.C
	}

	deadline := time.NewTimer(timeout)
	defer deadline.Stop()

	for {
		select {
		case ev, ok := <-w.ResultChan():
			require.True(t, ok, "the watch of the Node ended")
			require.NotEqual(t, watch.Error, ev.Type, "the watch of the Node failed: %v", ev.Object)

			if ev.Type == watch.Deleted {
				return time.Now()
			}
		case <-stop:
			return time.Time{}
		case <-deadline.C:
			t.Fatalf("the watch of the Node saw no deletion within %s", timeout)
		}
	}
}

// TestForgedNotReadyTimeAcrossRestart: a Node whose machine was replaced at its address (positive evidence
// that it is stale), whose kubelet posts the Ready condition as False with a lastTransitionTime an hour old,
// with talos-ccm restarted on its state directory while the Node waits out the grace. The grace counts from
// talos-ccm's own observation, which the restart keeps (neither reset nor replaced by the kubelet's time); a
// later time the kubelet writes then makes the wait longer, and the Node is deleted no earlier than the
// grace after it.
func TestForgedNotReadyTimeAcrossRestart(t *testing.T) {
	const grace = 12 * time.Second

	machines := fleet("lcrestart", 2, 65)
	replaced := machines[1].Name
	stateDir := filepath.Join(t.TempDir(), "state")
	opts := func(socket string) app.Options {
		return app.Options{StateDir: stateDir, Pipeline: lifecycleOptions(ccmpkg.NodeLifecycleOptions{DeleteStaleNodes: true, StaleNodeGrace: grace}), APIListen: socket}
	}

	sim, srv := talossim.StartTest(t, machines)

	firstSocket := filepath.Join(socketDir(t), "ccm.sock")
	first := startCCM(t, srv, opts(firstSocket))
	st := stateClient(t, firstSocket)

	joinNodes(t, machines)
	waitNodes(t, names(machines), 60*time.Second, initialized)
	waitLifecycle(t, st, replaced, "records the machine's identity", func(v *specs.NodeLifecycleSpec) bool {
		return v.GetRecordedMachineUuid() != ""
	})

	require.NoError(t, sim.UpdateMachine(replaced, func(m *talossim.Machine) { m.System.UUID = "00000000-0000-4000-8000-00000000cafe" }))

	w := watchNode(t, replaced)
	posted := time.Now()
	postNotReady(t, replaced, posted.Add(-time.Hour))

	deletedAt := awaitNodeDeleted(t, w, posted.Add(time.Second), outcomeTimeout)
	require.True(t, deletedAt.IsZero(), "the Node was deleted %s after the forged NotReady, within the grace of %s",
		deletedAt.Sub(posted).Round(time.Millisecond), grace)

	const evidence = "the machine answering at the node's address is 00000000-0000-4000-8000-00000000cafe"

	waiting := func(v *specs.NodeLifecycleSpec) bool {
		return !v.GetNodeReady() && strings.Contains(v.GetReason(), evidence) && !v.GetDelete()
	}

	before := waitLifecycle(t, st, replaced, "waits out the grace", waiting)
	observed := before.GetNotReadyObserved().AsTime()
	require.False(t, observed.Before(posted), "talos-ccm's observation %s precedes the write %s", observed, posted)

	first.stop()

	secondSocket := filepath.Join(socketDir(t), "ccm.sock")
	startCCM(t, srv, opts(secondSocket))

	// Now the kubelet says that the Node turned NotReady a little after talos-ccm saw it (whole seconds: a
	// condition's time has no finer precision). A later time makes the wait longer; and a verdict that
	// shows it is the restarted talos-ccm's own, not the one it found in its state.
	later := observed.Truncate(time.Second).Add(2 * time.Second)
	postNotReady(t, replaced, later)

	after := waitLifecycle(t, stateClient(t, secondSocket), replaced, "decided again after the restart", func(v *specs.NodeLifecycleSpec) bool {
		return waiting(v) && v.GetNotReadySince().AsTime().Equal(later)
	})
	require.Equal(t, observed, after.GetNotReadyObserved().AsTime(), "the restart changed when talos-ccm first saw the Node NotReady")

	deletedAt = awaitNodeDeleted(t, w, time.Time{}, grace+outcomeTimeout)
	require.False(t, deletedAt.IsZero(), "the Node was not deleted within %s of the forged NotReady", grace+outcomeTimeout)
	require.False(t, deletedAt.Before(later.Add(grace)),
		"the Node was deleted %s after the kubelet's later NotReady time, within the grace of %s", deletedAt.Sub(later).Round(time.Millisecond), grace)

	waitNodeEvent(t, replaced, corev1.EventTypeWarning, "StaleNodeDeleted", evidence)
}

// watchNode starts a watch of one Node, so that its deletion is awaited as the apiserver's event rather than
// found by a poll.
func watchNode(t *testing.T, name string) watch.Interface {
	t.Helper()

	current := getNode(t, name)

	w, err := env.Clientset().CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: current.ResourceVersion,
	})
	require.NoError(t, err)
	t.Cleanup(w.Stop)

	return w
}

// forgeNotReady attacks as the node's kubelet: it points the Node's provided-node-ip annotation at the
// victim's machine (which names itself another node: evidence that the Node is stale) and posts the Ready
// condition as False with a lastTransitionTime an hour old. It returns the time before the condition was
// written: talos-ccm cannot have seen the Node NotReady earlier.
func forgeNotReady(t *testing.T, node string, victim talossim.Machine) time.Time {
	t.Helper()

	hostile := kubeletClientset(t, node)

	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, kubekeys.AnnotationProvidedNodeIP, providedNodeIP(victim))
	_, err := hostile.CoreV1().Nodes().Patch(t.Context(), node, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "a kubelet may edit its own Node's annotations")

	posted := time.Now()
	postNotReady(t, node, posted.Add(-time.Hour))

	return posted
}

// postNotReady writes, as the node's kubelet, its Node's Ready condition as False since the given time.
func postNotReady(t *testing.T, node string, since time.Time) {
	t.Helper()

	hostile := kubeletClientset(t, node)
	transition := metav1.NewTime(since)

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := hostile.CoreV1().Nodes().Get(t.Context(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}

		for i := range n.Status.Conditions {
			if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
				c.Status, c.Reason, c.LastTransitionTime, c.LastHeartbeatTime = corev1.ConditionFalse, "KubeletNotReady", transition, transition
			}
		}

		_, err = hostile.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})

		return err
	})
	require.NoError(t, err, "a kubelet may write its own Node's conditions")
}

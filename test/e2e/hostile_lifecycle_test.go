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
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// TestAttackForgedNotReadyTime: with --delete-stale-nodes, a kubelet credential posts its own Node's Ready
// condition as False with a lastTransitionTime an hour old, and points its provided-node-ip annotation at
// another machine, which names itself another node: positive evidence that the Node is stale. The grace
// before the deletion must be measured from when talos-ccm saw the Node turn NotReady, not from the time the
// kubelet wrote (DESIGN.md, section 5a): the Node is deleted no earlier than the grace after that.
func TestAttackForgedNotReadyTime(t *testing.T) {
	const grace = 8 * time.Second

	socket := filepath.Join(socketDir(t), "ccm.sock")
	victim, own, kubelets := attackScene(t, "lcforge", 64, app.Options{DeleteStaleNodes: true, StaleNodeGrace: grace, APIListen: socket})
	attacker := own.Name
	st := stateClient(t, socket)

	w := watchNode(t, attacker)
	posted := forgeNotReady(t, attacker, victim)
	evidence := "names itself node " + victim.Name

	// Halfway through the grace, the Node must still be there, with a verdict that waits.
	deletedAt := awaitNodeDeleted(t, w, posted.Add(grace/2), grace+outcomeTimeout)
	require.True(t, deletedAt.IsZero(), "the Node was deleted %s after the forged NotReady, within the grace of %s",
		deletedAt.Sub(posted).Round(time.Millisecond), grace)

	verdict := waitLifecycle(t, st, attacker, "sees the forged NotReady and the other machine", func(v *specs.NodeLifecycleSpec) bool {
		return !v.GetNodeReady() && strings.Contains(v.GetReason(), evidence)
	})
	require.False(t, verdict.GetDelete(), "deleted within the grace: %s", verdict.GetReason())

	observed := verdict.GetNotReadyObserved().AsTime()
	assert.False(t, observed.Before(posted), "talos-ccm's observation %s precedes the write %s", observed, posted)
	assert.False(t, verdict.GetNotReadySince().AsTime().Before(observed), "the grace starts before talos-ccm's observation: %s", verdict)

	// The Node is deleted once the grace has passed since talos-ccm's observation, never earlier.
	deletedAt = awaitNodeDeleted(t, w, time.Time{}, grace+outcomeTimeout)
	require.False(t, deletedAt.IsZero(), "the Node was not deleted within %s of the forged NotReady", grace+outcomeTimeout)
	require.False(t, deletedAt.Before(observed.Add(grace)),
		"the Node was deleted %s after talos-ccm saw it NotReady, within the grace of %s", deletedAt.Sub(observed).Round(time.Millisecond), grace)

	waitNodeEvent(t, attacker, corev1.EventTypeWarning, "StaleNodeDeleted", evidence)
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

// TestForgedNotReadyTimeAcrossRestart: the same attack, with talos-ccm restarted on its state directory
// while the Node waits out the grace. The restarted talos-ccm keeps the time its previous run first saw the
// Node NotReady (the restart neither resets it nor lets the kubelet's old time in); a later time the
// kubelet writes then makes the wait longer, and the Node is deleted no earlier than the grace after it.
func TestForgedNotReadyTimeAcrossRestart(t *testing.T) {
	const grace = 12 * time.Second

	machines := fleet("lcrestart", 2, 65)
	victim, attacker := machines[0], machines[1].Name
	stateDir := filepath.Join(t.TempDir(), "state")
	opts := func(socket string) app.Options {
		return app.Options{StateDir: stateDir, DeleteStaleNodes: true, StaleNodeGrace: grace, APIListen: socket}
	}

	_, srv := talossim.StartTest(t, machines)

	firstSocket := filepath.Join(socketDir(t), "ccm.sock")
	first := startCCM(t, srv, opts(firstSocket))

	joinNodes(t, machines)
	waitNodes(t, names(machines), 60*time.Second, initialized)

	w := watchNode(t, attacker)
	posted := forgeNotReady(t, attacker, victim)
	evidence := "names itself node " + victim.Name
	waiting := func(v *specs.NodeLifecycleSpec) bool {
		return !v.GetNodeReady() && strings.Contains(v.GetReason(), evidence) && !v.GetDelete()
	}

	before := waitLifecycle(t, stateClient(t, firstSocket), attacker, "waits out the grace", waiting)
	observed := before.GetNotReadyObserved().AsTime()
	require.False(t, observed.Before(posted), "talos-ccm's observation %s precedes the write %s", observed, posted)

	first.stop()

	secondSocket := filepath.Join(socketDir(t), "ccm.sock")
	startCCM(t, srv, opts(secondSocket))

	// Now the kubelet says that the Node turned NotReady a little after talos-ccm saw it (whole seconds: a
	// condition's time has no finer precision). A later time makes the wait longer; and a verdict that
	// shows it is the restarted talos-ccm's own, not the one it found in its state.
	later := observed.Truncate(time.Second).Add(2 * time.Second)
	postNotReady(t, attacker, later)

	after := waitLifecycle(t, stateClient(t, secondSocket), attacker, "decided again after the restart", func(v *specs.NodeLifecycleSpec) bool {
		return waiting(v) && v.GetNotReadySince().AsTime().Equal(later)
	})
	require.Equal(t, observed, after.GetNotReadyObserved().AsTime(), "the restart changed when talos-ccm first saw the Node NotReady")

	deletedAt := awaitNodeDeleted(t, w, time.Time{}, grace+outcomeTimeout)
	require.False(t, deletedAt.IsZero(), "the Node was not deleted within %s of the forged NotReady", grace+outcomeTimeout)
	require.False(t, deletedAt.Before(later.Add(grace)),
		"the Node was deleted %s after the kubelet's later NotReady time, within the grace of %s", deletedAt.Sub(later).Round(time.Millisecond), grace)
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

	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, talossim.AnnotationProvidedNodeIP, providedNodeIP(victim))
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

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

	// The Node's deletion is awaited on a watch started before the attack, so that its time is the
	// apiserver's event, not a poll's.
	current := getNode(t, attacker)
	w, err := env.Clientset().CoreV1().Nodes().Watch(t.Context(), metav1.ListOptions{
		FieldSelector: "metadata.name=" + attacker, ResourceVersion: current.ResourceVersion,
	})
	require.NoError(t, err)
	t.Cleanup(w.Stop)

	hostile := kubeletClientset(t, attacker)

	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, talossim.AnnotationProvidedNodeIP, providedNodeIP(victim))
	_, err = hostile.CoreV1().Nodes().Patch(t.Context(), attacker, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "a kubelet may edit its own Node's annotations")

	// Every time talos-ccm can have observed the NotReady condition is after this.
	posted := time.Now()
	forged := metav1.NewTime(posted.Add(-time.Hour))

	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := hostile.CoreV1().Nodes().Get(t.Context(), attacker, metav1.GetOptions{})
		if err != nil {
			return err
		}

		for i := range n.Status.Conditions {
			if c := &n.Status.Conditions[i]; c.Type == corev1.NodeReady {
				c.Status, c.Reason, c.LastTransitionTime, c.LastHeartbeatTime = corev1.ConditionFalse, "KubeletNotReady", forged, forged
			}
		}

		_, err = hostile.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})

		return err
	})
	require.NoError(t, err, "a kubelet may write its own Node's conditions")

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

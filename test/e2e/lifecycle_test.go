package e2e_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

const shutdownTaint = "node.cloudprovider.kubernetes.io/shutdown"

func hasShutdownTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == shutdownTaint })
}

func TestShutdownTaint(t *testing.T) {
	machines := fleet("shut", 3, 21)
	target := machines[0].Name

	sim, srv := talossim.StartTest(t, machines)

	startCCM(t, srv, app.Options{})
	kubelets := joinNodes(t, machines)
	waitNodes(t, names(machines), 30*time.Second, initialized)

	// Shutting down alone, while the Node is still Ready, is no reason for the taint.
	require.NoError(t, sim.SetStage(target, "shutting down"))
	time.Sleep(2 * time.Second)
	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), target, metav1.GetOptions{})
	require.NoError(t, err)
	require.False(t, hasShutdownTaint(n), "a Ready Node is not tainted")

	// NotReady and shutting down: tainted, with an Event saying why; and it stays tainted once the machine
	// stops answering.
	require.NoError(t, kubelets.SetReady(t.Context(), target, false))
	waitNodes(t, []string{target}, 20*time.Second, hasShutdownTaint)
	waitNodeEvent(t, target, corev1.EventTypeNormal, "MachineShutdown", "its machine reports that it is shutting down")

	require.NoError(t, sim.SetUnreachable(target, true))
	time.Sleep(7 * time.Second) // more than a probe interval
	n, err = env.Clientset().CoreV1().Nodes().Get(t.Context(), target, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, hasShutdownTaint(n), "a machine that stopped answering after shutting down stays shut down")

	// Running and Ready again: the taint goes.
	require.NoError(t, sim.SetUnreachable(target, false))
	require.NoError(t, sim.SetStage(target, "running"))
	require.NoError(t, kubelets.SetReady(t.Context(), target, true))
	waitNodes(t, []string{target}, 20*time.Second, func(n *corev1.Node) bool { return !hasShutdownTaint(n) })
	waitNodeEvent(t, target, corev1.EventTypeNormal, "MachineRunning", "the Node is Ready")

	// The other Nodes were never touched.
	for _, name := range names(machines)[1:] {
		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		require.False(t, hasShutdownTaint(n), name)
	}
}

func TestStaleNodeDeletion(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deleteFlag bool
	}{
		{name: "with --delete-stale-nodes", deleteFlag: true},
		{name: "without the flag", deleteFlag: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "stale-off"
			if tc.deleteFlag {
				prefix = "stale-on"
			}

			machines := fleet(prefix, 3, 31)
			swapped, unreachable := machines[0].Name, machines[1].Name

			sim, srv := talossim.StartTest(t, machines)

			startCCM(t, srv, app.Options{DeleteStaleNodes: tc.deleteFlag, StaleNodeGrace: 3 * time.Second})
			kubelets := joinNodes(t, machines)
			waitNodes(t, names(machines), 30*time.Second, initialized)

			// Let talos-ccm record every machine's identity.
			time.Sleep(2 * time.Second)

			// Another machine now answers at the first node's address; the second machine is unreachable.
			require.NoError(t, sim.UpdateMachine(swapped, func(m *talossim.Machine) { m.System.UUID = "00000000-0000-4000-8000-00000000beef" }))
			require.NoError(t, sim.SetUnreachable(unreachable, true))

			require.NoError(t, kubelets.SetReady(t.Context(), swapped, false))
			require.NoError(t, kubelets.SetReady(t.Context(), unreachable, false))

			gone := func() bool {
				_, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), swapped, metav1.GetOptions{})

				return apierrors.IsNotFound(err)
			}

			if tc.deleteFlag {
				require.Eventually(t, gone, 30*time.Second, 200*time.Millisecond, "the stale Node must be deleted")
				waitNodeEvent(t, swapped, corev1.EventTypeWarning, "StaleNodeDeleted", "the machine answering at the node's address is 00000000-0000-4000-8000-00000000beef")
			} else {
				time.Sleep(12 * time.Second) // grace, probes and decisions several times over
				require.False(t, gone(), "nothing is deleted without the flag")
			}

			// An unreachable machine is never a reason to delete its Node.
			_, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), unreachable, metav1.GetOptions{})
			require.NoError(t, err, "the Node of an unreachable machine must survive")
		})
	}
}

// Nodes of GCP spot machines that stay NotReady past the grace are deleted with
// --delete-preempted-spot-nodes, so that they re-register; other Nodes, and every Node without the flag,
// stay.
func TestPreemptedSpotNodeDeletion(t *testing.T) {
	for _, tc := range []struct {
		name       string
		deleteFlag bool
	}{
		{name: "with --delete-preempted-spot-nodes", deleteFlag: true},
		{name: "without the flag", deleteFlag: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prefix := "spot-off"
			if tc.deleteFlag {
				prefix = "spot-on"
			}

			machines := fleet(prefix, 12, 33)

			// Two GCP machines, the first spot, the second not; a spot machine of another platform.
			var gcp, other []int

			for i, m := range machines {
				switch m.Platform {
				case "gcp":
					gcp = append(gcp, i)
				case "aws", "azure":
					other = append(other, i)
				}
			}

			require.GreaterOrEqual(t, len(gcp), 2, "two GCP machines in the fleet")
			require.NotEmpty(t, other, "a spot machine of another cloud in the fleet")

			machines[gcp[0]].Spot, machines[gcp[1]].Spot, machines[other[0]].Spot = true, false, true
			spot, onDemand, otherSpot := machines[gcp[0]].Name, machines[gcp[1]].Name, machines[other[0]].Name

			_, srv := talossim.StartTest(t, machines)

			startCCM(t, srv, app.Options{DeletePreemptedSpotNodes: tc.deleteFlag, StaleNodeGrace: 3 * time.Second})
			kubelets := joinNodes(t, machines)
			waitNodes(t, names(machines), 30*time.Second, initialized)

			for _, name := range []string{spot, onDemand, otherSpot} {
				require.NoError(t, kubelets.SetReady(t.Context(), name, false))
			}

			exists := func(name string) bool {
				_, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
				if apierrors.IsNotFound(err) {
					return false
				}

				require.NoError(t, err)

				return true
			}

			if tc.deleteFlag {
				require.Eventually(t, func() bool { return !exists(spot) }, 30*time.Second, 200*time.Millisecond,
					"the NotReady Node of a GCP spot machine must be deleted")
				waitNodeEvent(t, spot, corev1.EventTypeWarning, "StaleNodeDeleted", "preempted GCP spot machine")
			} else {
				time.Sleep(12 * time.Second) // grace, probes and decisions several times over
				require.True(t, exists(spot), "nothing is deleted without the flag")
			}

			require.True(t, exists(onDemand), "the Node of a GCP machine that is not spot stays")
			require.True(t, exists(otherSpot), "the Node of a spot machine of another cloud stays")
		})
	}
}

// waitNodeEvent waits for an Event of the given type and reason on the Node whose message contains message.
func waitNodeEvent(t *testing.T, node, eventType, reason, message string) {
	t.Helper()

	var last []string

	require.Eventually(t, func() bool {
		events, err := env.Clientset().CoreV1().Events(metav1.NamespaceDefault).List(t.Context(), metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason,
		})
		require.NoError(t, err)

		last = last[:0]

		for _, e := range events.Items {
			last = append(last, e.Type+": "+e.Message)

			if e.Type == eventType && strings.Contains(e.Message, message) {
				return true
			}
		}

		return false
	}, 20*time.Second, 200*time.Millisecond, "a %s Event %s on %s saying %q (got %q)", eventType, reason, node, message, &last)
}

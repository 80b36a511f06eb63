package e2e_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	noderes "github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
	ccmpkg "github.com/talos-ccm/talos-ccm/pkg/ccm"
)

func hasShutdownTaint(n *corev1.Node) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == kubekeys.TaintShutdown })
}

func TestShutdownTaint(t *testing.T) {
	machines := fleet("shut", 3, 21)
	target := machines[0].Name

	sim, srv := talossim.StartTest(t, machines)

	socket := filepath.Join(socketDir(t), "ccm.sock")
	startCCM(t, srv, app.Options{APIListen: socket})
	st := stateClient(t, socket)

	kubelets := joinNodes(t, machines)
	waitNodes(t, names(machines), 30*time.Second, initialized)

	// Shutting down alone, while the Node is still Ready, is no reason for the taint. talos-ccm asks only the
	// machines of NotReady Nodes for their stage, so no state of its shows the stage yet: the Node stays
	// untainted for a while.
	require.NoError(t, sim.SetStage(target, "shutting down"))

	testenv.Consistently(t, 2*time.Second, 200*time.Millisecond, "a Ready Node is not tainted", func(ctx context.Context) error {
		return nodeHas(ctx, target, func(n *corev1.Node) bool { return !hasShutdownTaint(n) })
	})

	// NotReady and shutting down: tainted, with an Event saying why; and it stays tainted once the machine
	// stops answering.
	require.NoError(t, kubelets.SetReady(t.Context(), target, false))
	waitNodes(t, []string{target}, 20*time.Second, hasShutdownTaint)
	waitNodeEvent(t, target, corev1.EventTypeNormal, "MachineShutdown", "its machine reports that it is shutting down")

	require.NoError(t, sim.SetUnreachable(target, true))

	verdict := waitLifecycle(t, st, target, "made with the machine not answering", func(v *specs.NodeLifecycleSpec) bool {
		return !v.GetReachable()
	})
	require.True(t, verdict.GetShutdown(), "a machine that stopped answering after shutting down stays shut down: %s", verdict.GetReason())

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), target, metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, hasShutdownTaint(n), "the Node of a machine that stopped answering after shutting down stays tainted")

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

			socket := filepath.Join(socketDir(t), "ccm.sock")
			startCCM(t, srv, app.Options{Pipeline: lifecycleOptions(ccmpkg.NodeLifecycleOptions{DeleteStaleNodes: tc.deleteFlag, StaleNodeGrace: 3 * time.Second}), APIListen: socket})
			st := stateClient(t, socket)

			kubelets := joinNodes(t, machines)
			waitNodes(t, names(machines), 30*time.Second, initialized)

			// talos-ccm records every machine's identity, which another machine answering later contradicts.
			for _, name := range names(machines) {
				waitLifecycle(t, st, name, "records the machine's identity", func(v *specs.NodeLifecycleSpec) bool {
					return v.GetRecordedMachineUuid() != ""
				})
			}

			// Another machine now answers at the first node's address; the second machine is unreachable.
			require.NoError(t, sim.UpdateMachine(swapped, func(m *talossim.Machine) { m.System.UUID = "00000000-0000-4000-8000-00000000beef" }))
			require.NoError(t, sim.SetUnreachable(unreachable, true))

			require.NoError(t, kubelets.SetReady(t.Context(), swapped, false))
			require.NoError(t, kubelets.SetReady(t.Context(), unreachable, false))

			const evidence = "the machine answering at the node's address is 00000000-0000-4000-8000-00000000beef"

			if tc.deleteFlag {
				testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "the stale Node is deleted", func(ctx context.Context) error {
					return nodeGone(ctx, swapped)
				})
				waitNodeEvent(t, swapped, corev1.EventTypeWarning, "StaleNodeDeleted", evidence)
			} else {
				requireKeptWithoutFlag(t, st, swapped, evidence)
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

			socket := filepath.Join(socketDir(t), "ccm.sock")
			startCCM(t, srv, app.Options{Pipeline: lifecycleOptions(ccmpkg.NodeLifecycleOptions{DeletePreemptedSpotNodes: tc.deleteFlag, StaleNodeGrace: 3 * time.Second}), APIListen: socket})
			st := stateClient(t, socket)

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

			const evidence = "preempted GCP spot machine"

			if tc.deleteFlag {
				testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "the NotReady Node of a GCP spot machine is deleted", func(ctx context.Context) error {
					return nodeGone(ctx, spot)
				})
				waitNodeEvent(t, spot, corev1.EventTypeWarning, "StaleNodeDeleted", evidence)
			} else {
				requireKeptWithoutFlag(t, st, spot, evidence)
			}

			require.True(t, exists(onDemand), "the Node of a GCP machine that is not spot stays")
			require.True(t, exists(otherSpot), "the Node of a spot machine of another cloud stays")
		})
	}
}

// staleWindow is how long a Node that would be deleted with a deletion flag must stay without it: the grace,
// probes and decisions several times over.
const staleWindow = 12 * time.Second

// requireKeptWithoutFlag checks that the Node, which talos-ccm finds stale for the reason evidence, is not
// deleted without the flag: talos-ccm's verdict names the evidence but does not delete, and the Node stays
// for staleWindow.
func requireKeptWithoutFlag(t *testing.T, st state.State, node, evidence string) {
	t.Helper()

	verdict := waitLifecycle(t, st, node, "names the evidence", func(v *specs.NodeLifecycleSpec) bool {
		return strings.Contains(v.GetReason(), evidence)
	})
	require.False(t, verdict.GetDelete(), "nothing is deleted without the flag: %s", verdict.GetReason())

	testenv.Consistently(t, staleWindow, 200*time.Millisecond, "nothing is deleted without the flag", func(ctx context.Context) error {
		return nodeHas(ctx, node, func(*corev1.Node) bool { return true })
	})
}

// waitLifecycle waits until talos-ccm's NodeLifecycle verdict about the Node satisfies cond (what says how),
// read through its state API, and returns it.
func waitLifecycle(t *testing.T, st state.State, node, what string, cond func(*specs.NodeLifecycleSpec) bool) *specs.NodeLifecycleSpec {
	t.Helper()

	var verdict *specs.NodeLifecycleSpec

	testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, "the NodeLifecycle of "+node+" "+what, func(ctx context.Context) error {
		res, err := safe.StateGetByID[*noderes.NodeLifecycle](ctx, st, node)
		if err != nil {
			return err
		}

		if v := res.TypedSpec().Value; !cond(v) {
			return fmt.Errorf("verdict {%s}", v)
		}

		verdict = res.TypedSpec().Value

		return nil
	})

	return verdict
}

// nodeHas returns nil when the Node exists and cond holds for it, or an error that says why not.
func nodeHas(ctx context.Context, name string, cond func(*corev1.Node) bool) error {
	n, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}

	if !cond(n) {
		return fmt.Errorf("Node %s not as expected: taints %v", name, n.Spec.Taints)
	}

	return nil
}

// nodeGone returns nil once the Node is deleted.
func nodeGone(ctx context.Context, name string) error {
	_, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})

	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	default:
		return fmt.Errorf("Node %s exists", name)
	}
}

// waitNodeEvent waits for an Event of the given type and reason on the Node whose message contains message.
func waitNodeEvent(t *testing.T, node, eventType, reason, message string) {
	t.Helper()

	what := fmt.Sprintf("a %s Event %s on %s saying %q", eventType, reason, node, message)

	testenv.Eventually(t, 20*time.Second, 200*time.Millisecond, what, func(ctx context.Context) error {
		events, err := env.Clientset().CoreV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Node,involvedObject.name=" + node + ",reason=" + reason,
		})
		if err != nil {
			return err
		}

		var seen []string

		for _, e := range events.Items {
			if e.Type == eventType && strings.Contains(e.Message, message) {
				return nil
			}

			seen = append(seen, e.Type+": "+e.Message)
		}

		return fmt.Errorf("events %q", seen)
	})
}

// lifecycleOptions are the pipeline options of talos-ccm with node-lifecycle's settings.
func lifecycleOptions(lifecycle ccmpkg.NodeLifecycleOptions) ccmpkg.Options {
	return ccmpkg.Options{NodeLifecycle: lifecycle}
}

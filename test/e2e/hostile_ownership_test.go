package e2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	noderes "github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// The keys of the rule of the ownership tests: a taint and a label that NodeRestriction keeps a kubelet from
// changing, and an annotation.
const (
	dedicatedTaint      = "example.com/dedicated"
	dedicatedTaintEntry = dedicatedTaint + ":NoSchedule"
	dedicatedLabel      = "node-role.kubernetes.io/dedicated"
	dedicatedNote       = "example.com/dedicated-since"
)

// dedicatedRule is a rule that sets the taint, label and annotation above: on the Nodes whose machine's
// hostname matches hostname (a regular expression), or on every Node when hostname is empty.
func dedicatedRule(hostname string) string {
	selector := ""
	if hostname != "" {
		selector = fmt.Sprintf(`
    nodeSelector:
      - matchExpressions:
          - key: hostname
            operator: Regexp
            values: [%q]`, hostname)
	}

	return fmt.Sprintf(`transformations:
  - name: dedicated%s
    labels:
      %s: ""
    annotations:
      %s: "2026"
    taints:
      %s: "db:NoSchedule"
`, selector, dedicatedLabel, dedicatedNote, dedicatedTaint)
}

// hasDedicated reports whether n carries the rule's taint and label.
func hasDedicated(n *corev1.Node) bool {
	_, labelled := n.Labels[dedicatedLabel]

	return labelled && slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == dedicatedTaint })
}

// TestHostileOwnershipForgedEntry: a rule sets a taint and a protected label on the victim's Node; an operator
// puts the same keys on the attacker's Node by hand. The attacker's kubelet lists them in its Node's ownership
// annotations, hoping that talos-ccm removes them as its own (no rule gives them to that Node). talos-ccm owns
// only what it recorded in its own state: it removes nothing, rewrites the forged copy, and the victim keeps
// what its rule gives it.
func TestHostileOwnershipForgedEntry(t *testing.T) {
	const prefix, seed = "ownforged", 66

	victimName := fleet(prefix, 2, seed)[0].Name
	config := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(config, []byte(dedicatedRule("^"+regexp.QuoteMeta(victimName)+`(\.|$)`)), 0o600))

	victim, own, kubelets := attackScene(t, prefix, seed, app.Options{ConfigFile: config})
	attacker := own.Name

	// The premise: the rule is live, and gives its keys to the victim only.
	waitNodes(t, []string{victim.Name}, 30*time.Second, hasDedicated)
	require.False(t, hasDedicated(getNode(t, attacker)), "the rule must not select the attacker's Node")

	// The forgery: its own Node's annotations, which a kubelet may write.
	forged := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q,%q:%q,%q:%q}}}`,
		kubekeys.AnnotationOwnedTaints, dedicatedTaintEntry,
		kubekeys.AnnotationOwnedLabels, dedicatedLabel,
		kubekeys.AnnotationOwnedAnnotations, dedicatedNote)
	_, err := kubeletClientset(t, attacker).CoreV1().Nodes().Patch(t.Context(), attacker, types.MergePatchType, forged, metav1.PatchOptions{})
	require.NoError(t, err, "a kubelet may edit its own Node's annotations")

	// The operator's keys come after: talos-ccm runs on the change of the Node's labels and taints, and sees
	// the forged entries in place.
	admin := env.Clientset().CoreV1().Nodes()
	operated := fmt.Appendf(nil, `{"metadata":{"labels":{%q:""},"annotations":{%q:"ops"}},"spec":{"taints":[{"key":%q,"value":"ops","effect":"NoSchedule"}]}}`,
		dedicatedLabel, dedicatedNote, dedicatedTaint)
	_, err = admin.Patch(t.Context(), attacker, types.StrategicMergePatchType, operated, metav1.PatchOptions{})
	require.NoError(t, err)

	// talos-ccm read the Node with the forged entries and wrote its copy over them: the attack had its chance.
	testenv.Eventually(t, outcomeTimeout, 100*time.Millisecond, "talos-ccm rewrites the forged copy on "+attacker, func(ctx context.Context) error {
		n, err := admin.Get(ctx, attacker, metav1.GetOptions{})
		if err != nil {
			return err
		}

		for _, key := range []string{kubekeys.AnnotationOwnedTaints, kubekeys.AnnotationOwnedLabels, kubekeys.AnnotationOwnedAnnotations} {
			if strings.Contains(n.Annotations[key], "dedicated") {
				return fmt.Errorf("%s is %q", key, n.Annotations[key])
			}
		}

		return nil
	})

	testenv.Consistently(t, 3*time.Second, 200*time.Millisecond, "the operator's keys stay on "+attacker, func(ctx context.Context) error {
		n, err := admin.Get(ctx, attacker, metav1.GetOptions{})
		if err != nil {
			return err
		}

		if !hasDedicated(n) {
			return fmt.Errorf("taint or label gone: labels %v, taints %v", n.Labels, n.Spec.Taints)
		}

		if n.Annotations[dedicatedNote] != "ops" {
			return fmt.Errorf("annotation %s is %q", dedicatedNote, n.Annotations[dedicatedNote])
		}

		return nil
	})

	assert.True(t, hasDedicated(getNode(t, victim.Name)), "the victim keeps what its rule gives it")
	assert.True(t, initialized(getNode(t, attacker)), "the attacker's own Node stays initialized")
	assertVictimIntact(t, kubelets, victim)
}

// TestOwnershipSurvivesRestart: talos-ccm records what it owns on each Node in its state, persisted in the
// state directory. A rule's keys are given to two Nodes; talos-ccm stops, the rule is removed from the
// configuration, and one kubelet strikes the keys from its Node's ownership annotations. Started again on the
// same state, talos-ccm removes the rule's keys from both Nodes, and nothing else.
func TestOwnershipSurvivesRestart(t *testing.T) {
	machines := fleet("ownrestart", 2, 67)
	_, srv := talossim.StartTest(t, machines)

	stateDir := filepath.Join(t.TempDir(), "state")
	config := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(config, []byte(dedicatedRule("")), 0o600))

	opts := func(socket string) app.Options {
		return app.Options{StateDir: stateDir, ConfigFile: config, APIListen: socket}
	}

	firstSocket := filepath.Join(socketDir(t), "ccm.sock")
	first := startCCM(t, srv, opts(firstSocket))

	joinNodes(t, machines)
	waitNodes(t, names(machines), 60*time.Second, func(n *corev1.Node) bool { return initialized(n) && hasDedicated(n) })

	// The record is talos-ccm's own resource, readable like any other.
	st := stateClient(t, firstSocket)

	for _, m := range machines {
		node := getNode(t, m.Name)

		testenv.Eventually(t, 10*time.Second, 50*time.Millisecond, "the ownership record of "+m.Name, func(ctx context.Context) error {
			record, err := safe.StateGetByID[*noderes.NodeOwnership](ctx, st, m.Name)
			if err != nil {
				return err
			}

			spec := record.TypedSpec().Value
			if spec.GetNodeUid() != string(node.UID) || !slices.Contains(spec.GetTaints(), dedicatedTaintEntry) ||
				!slices.Contains(spec.GetLabels(), dedicatedLabel) || !slices.Contains(spec.GetAnnotations(), dedicatedNote) {
				return fmt.Errorf("record %v", spec)
			}

			return nil
		})
	}

	first.stop()

	// While talos-ccm is down, the rule goes, and one kubelet strikes the keys from its Node's copies.
	require.NoError(t, os.WriteFile(config, []byte("transformations: []\n"), 0o600))

	struck := machines[1].Name
	strike := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null,%q:null,%q:null}}}`,
		kubekeys.AnnotationOwnedTaints, kubekeys.AnnotationOwnedLabels, kubekeys.AnnotationOwnedAnnotations)
	_, err := kubeletClientset(t, struck).CoreV1().Nodes().Patch(t.Context(), struck, types.MergePatchType, strike, metav1.PatchOptions{})
	require.NoError(t, err)

	before := map[string]*corev1.Node{}
	for _, m := range machines {
		before[m.Name] = getNode(t, m.Name)
	}

	startCCM(t, srv, opts(filepath.Join(socketDir(t), "ccm.sock")))

	waitNodes(t, names(machines), 30*time.Second, func(n *corev1.Node) bool {
		_, noted := n.Annotations[dedicatedNote]

		return !hasDedicated(n) && !noted && !slices.ContainsFunc(n.Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == dedicatedTaint })
	})

	// Nothing else went: every other label and taint is as it was.
	for _, m := range machines {
		n := getNode(t, m.Name)

		wantLabels := before[m.Name].Labels
		delete(wantLabels, dedicatedLabel)
		assert.Equal(t, wantLabels, n.Labels, m.Name)

		wantTaints := slices.DeleteFunc(before[m.Name].Spec.Taints, func(taint corev1.Taint) bool { return taint.Key == dedicatedTaint })
		assert.Equal(t, wantTaints, n.Spec.Taints, m.Name)
	}
}

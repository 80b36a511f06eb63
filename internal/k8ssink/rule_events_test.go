package k8ssink_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
)

// drain returns the events recorded so far.
func drain(r *record.FakeRecorder) []string {
	var out []string

	for {
		select {
		case e := <-r.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestNodeRuleEvents(t *testing.T) {
	t.Parallel()

	recorder := record.NewFakeRecorder(100)
	events := k8ssink.NewNodeRuleEvents(recorder)
	n1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "u1"}}
	n2 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2", UID: "u2"}}

	skip := func(rule, reason string) *specs.SkippedRule { return &specs.SkippedRule{Rule: rule, Reason: reason} }

	for _, step := range []struct {
		name     string
		node     *corev1.Node
		skipped  []*specs.SkippedRule
		conflict string
		want     []string
	}{
		{"a skipped rule is posted", n1, []*specs.SkippedRule{skip("web", "bad label")}, "", []string{"Warning TransformationRuleSkipped transformation rule web skipped: bad label"}},
		{"a resync posts nothing", n1, []*specs.SkippedRule{skip("web", "bad label")}, "", nil},
		{"another node is separate", n2, []*specs.SkippedRule{skip("web", "bad label")}, "", []string{"Warning TransformationRuleSkipped transformation rule web skipped: bad label"}},
		{"a new reason is posted, a known one is not", n1, []*specs.SkippedRule{skip("web", "bad label"), skip("db", "bad taint"), skip("db", "bad taint")}, "", []string{"Warning TransformationRuleSkipped transformation rule db skipped: bad taint"}},
		{"the rule applies again", n1, nil, "", nil},
		{"skipped again: posted again", n1, []*specs.SkippedRule{skip("web", "bad label")}, "", []string{"Warning TransformationRuleSkipped transformation rule web skipped: bad label"}},
		{"a conflict is posted", n1, []*specs.SkippedRule{skip("web", "bad label")}, "machine at 10.0.0.2 is node n2, not n1", []string{"Warning MachineIdentityConflict machine at 10.0.0.2 is node n2, not n1"}},
		{"the same conflict is not posted again", n1, []*specs.SkippedRule{skip("web", "bad label")}, "machine at 10.0.0.2 is node n2, not n1", nil},
		{"the conflict ends", n1, []*specs.SkippedRule{skip("web", "bad label")}, "", nil},
		{"it comes back: posted again", n1, nil, "machine at 10.0.0.2 is node n2, not n1", []string{"Warning MachineIdentityConflict machine at 10.0.0.2 is node n2, not n1"}},
	} {
		events.Report(step.node, step.skipped, step.conflict)
		assert.Equal(t, step.want, drain(recorder), step.name)
	}

	events.Forget("n1")
	events.Report(n1, []*specs.SkippedRule{skip("web", "bad label")}, "")
	assert.Len(t, drain(recorder), 1, "a forgotten node starts over")
}

func TestConfigEvents(t *testing.T) {
	t.Parallel()

	recorder := record.NewFakeRecorder(10)

	assert.Nil(t, k8ssink.NewConfigEvents(recorder, "", "talos-ccm-0"), "no Pod, no events")
	assert.Nil(t, k8ssink.NewConfigEvents(nil, "kube-system", "talos-ccm-0"))

	var none *k8ssink.ConfigEvents

	none.ConfigRejected("cfg.yaml", errors.New("x")) // A nil reporter does nothing.

	events := k8ssink.NewConfigEvents(recorder, "kube-system", "talos-ccm-0")
	events.ConfigRejected("cfg.yaml", errors.New("cfg.yaml:3: unknown key"))
	events.ConfigRejected("cfg.yaml", errors.New(strings.Repeat("é", 2000)))

	got := drain(recorder)
	assert.Equal(t, "Warning ConfigRejected config file cfg.yaml rejected, the last good config stays active: cfg.yaml:3: unknown key", got[0])
	assert.LessOrEqual(t, len(got[1]), 1100)
	assert.True(t, strings.HasSuffix(got[1], "..."))
}

package k8ssink

import (
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// RuleSkippedReason is the reason of the Warning Event posted on a Node for a transformation rule that
// matched the Node but was skipped, because its output is invalid for it.
const RuleSkippedReason = "TransformationRuleSkipped"

// MachineIdentityConflictReason is the reason of the Warning Event posted on a Node that talos-ccm does
// not bind to the machine its kubelet points at (see the NodeTransform's conflict).
const MachineIdentityConflictReason = "MachineIdentityConflict"

// NodeRuleEvents posts a Warning Event on a Node for every transformation rule skipped for it, and for
// the conflict that keeps it from its machine's facts, as the
// NodeTransform records them. Each rule and reason is posted once: a resync, or a NodeTransform that
// changed for another reason, posts nothing again; a rule skipped again after it applied (or for another
// reason) is posted again. It is safe for concurrent use.
type NodeRuleEvents struct {
	recorder EventRecorder

	mu sync.Mutex
	// posted holds, per Node, the skipped rules last posted.
	posted map[string]map[skippedRule]struct{}
}

// skippedRule identifies a post: the rule and the reason; a conflict has no rule.
type skippedRule struct {
	rule, reason string
}

// conflictRule stands for the rule of a conflict's post.
const conflictRule = "\x00conflict"

// NewNodeRuleEvents returns a NodeRuleEvents posting through recorder.
func NewNodeRuleEvents(recorder EventRecorder) *NodeRuleEvents {
	return &NodeRuleEvents{recorder: recorder, posted: map[string]map[skippedRule]struct{}{}}
}

// Report posts the skipped rules of node, and its conflict when not empty, that were not posted already.
func (e *NodeRuleEvents) Report(node *corev1.Node, skipped []*specs.SkippedRule, conflict string) {
	if conflict != "" {
		skipped = append(slices.Clip(skipped), &specs.SkippedRule{Rule: conflictRule, Reason: conflict})
	}

	e.mu.Lock()
	post, next := newSkippedRules(e.posted[node.Name], skipped)

	if len(next) == 0 {
		delete(e.posted, node.Name)
	} else {
		e.posted[node.Name] = next
	}
	e.mu.Unlock()

	for _, s := range post {
		if s.rule == conflictRule {
			e.recorder.Event(node, corev1.EventTypeWarning, MachineIdentityConflictReason, s.reason)

			continue
		}

		e.recorder.Eventf(node, corev1.EventTypeWarning, RuleSkippedReason, "transformation rule %s skipped: %s", s.rule, s.reason)
	}
}

// Forget drops what was posted about a Node that is gone.
func (e *NodeRuleEvents) Forget(name string) {
	e.mu.Lock()
	delete(e.posted, name)
	e.mu.Unlock()
}

// newSkippedRules returns the skipped rules to post, given those posted before, and the new set of posted
// rules: the current ones.
func newSkippedRules(posted map[skippedRule]struct{}, skipped []*specs.SkippedRule) ([]skippedRule, map[skippedRule]struct{}) {
	var post []skippedRule

	next := make(map[skippedRule]struct{}, len(skipped))

	for _, s := range skipped {
		id := skippedRule{rule: s.GetRule(), reason: s.GetReason()}

		if _, seen := next[id]; seen {
			continue
		}

		next[id] = struct{}{}

		if _, done := posted[id]; !done {
			post = append(post, id)
		}
	}

	return post, next
}

package k8ssink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// NodeSinkController applies every NodeTransform to its Node with a NodeApplier and records the outcome
// in an ApplyStatus. It computes nothing: the NodeTransform is the decision. What talos-ccm owns on each
// Node (OwnedKeys) it keeps in a NodeOwnership, its own record, persisted with the decisions and written
// only when it changes; the record goes away with the NodeTransform.
type NodeSinkController = SinkController[*node.NodeTransform]

// NodeSinkOption configures the node sink.
type NodeSinkOption func(*nodeSink)

// WithRuleEvents makes the node sink post the transformation rules skipped for a Node as Events on it.
func WithRuleEvents(events *NodeRuleEvents) NodeSinkOption {
	return func(s *nodeSink) { s.ruleEvents = events }
}

// NewNodeSinkController instantiates the node sink. nodes reads the Nodes from the informer cache the
// KubeNode source fills; concurrency bounds the Nodes written at once, so one slow write never blocks the
// others.
func NewNodeSinkController(applier *NodeApplier, nodes corelisters.NodeLister, concurrency uint, opts ...NodeSinkOption) *NodeSinkController {
	s := &nodeSink{applier: applier, nodes: nodes}

	for _, o := range opts {
		o(s)
	}

	return newSinkController(sinkSettings[*node.NodeTransform]{
		Name:         "k8ssink.NodeSinkController",
		Kind:         sink.KindNode,
		Object:       "Node",
		NewInput:     node.NewNodeTransform,
		ApplyWriting: s.apply,
		ExtraOutputs: []controller.Output{{Type: node.NodeOwnershipType, Kind: controller.OutputExclusive}},
		Teardown:     s.teardown,
		Concurrency:  concurrency,
		ExtraInputs: []qtransform.ControllerOption{
			qtransform.WithExtraMappedInput[*kube.KubeNode](qtransform.MapperSameID[*node.NodeTransform]()),
		},
	})
}

type nodeSink struct {
	applier *NodeApplier
	nodes   corelisters.NodeLister
	// ruleEvents, when set, posts the skipped transformation rules.
	ruleEvents *NodeRuleEvents
	// behind tells the cached Nodes that the sink's own writes changed since.
	behind cacheBehind
}

// cacheBehindRetry is how long a pass waits for the informer's cache to catch up with the sink's last write
// to a Node before it looks again. The write's own event normally brings the Node back sooner (through its
// KubeNode): this bounds the wait for a write that changed nothing the KubeNode mirrors (annotations).
const cacheBehindRetry = time.Second

// cacheBehind records, per Node the sink wrote, the resourceVersions the Node went through before the sink's
// last write (the cached Node's it started from, and the one its status patch returned before its update),
// until the cache holds another. A pass that finds the cache still at one of them (a new decision, or the
// event of the sink's own first write, arrived before the informer delivered its last write) would plan
// from the Node as it was before that write and send it again: under load, the addresses patched twice for
// every Node, or the update sent from the patched Node, refused on a conflict, and sent again after a read.
// An entry lives from a write to the next pass that finds the cache past it: a few per Node being written,
// none for the others.
type cacheBehind struct {
	mu   sync.Mutex
	from map[string][]string
}

// wrote records that writes turned the Node of name, through the versions superseded, into the version to
// (the one the server returned last); versions equal to to are not waited for.
func (c *cacheBehind) wrote(name string, superseded []string, to string) {
	superseded = slices.DeleteFunc(slices.Clone(superseded), func(rv string) bool { return rv == to || rv == "" })
	if len(superseded) == 0 {
		return
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if c.from == nil {
		c.from = map[string][]string{}
	}

	c.from[name] = superseded
}

// stale reports whether the cached Node of name, at resourceVersion cached, is one the last writes
// superseded; any other ends the wait.
func (c *cacheBehind) stale(name, cached string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()

	from, ok := c.from[name]
	if !ok {
		return false
	}

	if slices.Contains(from, cached) {
		return true
	}

	c.forgetLocked(name)

	return false
}

// forget drops the entry of name (its NodeTransform went away).
func (c *cacheBehind) forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()

	c.forgetLocked(name)
}

func (c *cacheBehind) forgetLocked(name string) {
	delete(c.from, name)

	// A map keeps the room of its deleted entries: a burst of thousands of writes would keep it for ever.
	if len(c.from) == 0 {
		c.from = nil
	}
}

func (s *nodeSink) apply(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, nt *node.NodeTransform, last *specs.ApplyStatusSpec) (outcome, error) {
	name := nt.Metadata().ID()
	decision := nt.TypedSpec().Value

	current, err := s.nodes.Get(name)
	if err != nil {
		// A Node that is gone comes back through its KubeNode, which triggers this again.
		if apierrors.IsNotFound(err) && s.ruleEvents != nil {
			s.ruleEvents.Forget(name)
		}

		return cacheMiss("Node", name, err)
	}

	if s.behind.stale(name, current.ResourceVersion) {
		return untouchedFor(cacheBehindRetry), nil
	}

	if s.ruleEvents != nil {
		s.ruleEvents.Report(current, decision.GetSkippedRules(), decision.GetConflict())
	}

	if !decision.GetInitialize() {
		// Nothing is applied before the decision is complete: a half-initialized Node is worse than an
		// uninitialized one.
		return skipped("").withInitialized(!hasTaint(current, kubekeys.TaintUninitialized)), nil
	}

	record, err := stateread.Get[*node.NodeOwnership](ctx, rw, name)
	if err != nil && !state.IsNotFoundError(err) {
		return outcome{}, fmt.Errorf("failed to read node ownership: %w", err)
	}

	var owned OwnedKeys
	if record != nil {
		owned = OwnedKeysOf(record.TypedSpec().Value)
	}

	result, err := s.applier.Apply(ctx, current, desiredNode(name, decision), owned)
	initialized := result.Node != nil && !hasTaint(result.Node, kubekeys.TaintUninitialized)

	if result.Writes > 0 && result.Node != nil {
		s.behind.wrote(name, result.Superseded, result.Node.ResourceVersion)
	}
	writes := writesOf(result)

	if len(result.Ignored) > 0 {
		logger.Warn("ignored ownership annotations talos-ccm never recorded", zap.String("node", name), zap.Strings("entries", result.Ignored))
	}

	if err != nil {
		logger.Warn("failed to apply node", zap.String("node", name), zap.Int32("failures", last.GetConsecutiveFailures()+1), zap.Error(err))

		return failed(err, writes...).withInitialized(initialized), nil
	}

	if !result.Owned.Equal(owned) {
		if err := safe.WriterModify(ctx, rw, node.NewNodeOwnership(node.NamespaceName, name), func(r *node.NodeOwnership) error {
			result.Owned.WriteTo(r.TypedSpec().Value)

			return nil
		}); err != nil {
			return outcome{}, fmt.Errorf("failed to record node ownership: %w", err)
		}
	}

	var notes []string

	if c := result.ProviderIDConflict; c != nil {
		notes = append(notes, "the Node has providerID "+c.Current+", talos-ccm decided "+c.Desired+": left as it is")
	}

	if len(result.Ignored) > 0 {
		notes = append(notes, "the Node's ownership annotations list "+strings.Join(result.Ignored, ", ")+
			", which talos-ccm never recorded as its own: left alone")
	}

	if result.Initialized {
		metrics.NodeInitializationSeconds.Observe(time.Since(current.CreationTimestamp.Time).Seconds())
	}

	// A change of the Node is Info, but the pass that initializes it is said by "node initialized" already.
	if result.Writes > 0 {
		level := zap.InfoLevel
		if result.Initialized {
			level = zap.DebugLevel
		}

		logger.Log(level, "node applied", zap.String("node", name), zap.Strings("writes", writes), zap.Bool("initialized", result.Initialized))
	}

	return applied(writes...).withNote(strings.Join(notes, "; ")).withInitialized(initialized), nil
}

// teardown drops the record of what talos-ccm owns on the Node of a NodeTransform that goes away. The keys
// stay on the Node, if it is still there: the safe direction.
func (s *nodeSink) teardown(ctx context.Context, rw controller.ReaderWriter, _ *zap.Logger, nt *node.NodeTransform) error {
	s.behind.forget(nt.Metadata().ID())

	if err := rw.Destroy(ctx, node.NewNodeOwnership(node.NamespaceName, nt.Metadata().ID()).Metadata()); err != nil && !state.IsNotFoundError(err) {
		return fmt.Errorf("failed to destroy node ownership: %w", err)
	}

	return nil
}

// desiredNode converts a NodeTransform into what the applier takes.
func desiredNode(name string, spec *specs.NodeTransformSpec) NodeDesired {
	desired := NodeDesired{
		Name:        name,
		ProviderID:  spec.GetProviderId(),
		Labels:      spec.GetLabels(),
		Annotations: spec.GetAnnotations(),
		Initialize:  spec.GetInitialize(),
	}

	for _, t := range spec.GetTaints() {
		desired.Taints = append(desired.Taints, corev1.Taint{Key: t.GetKey(), Value: t.GetValue(), Effect: corev1.TaintEffect(t.GetEffect())})
	}

	for _, a := range spec.GetAddresses() {
		desired.Addresses = append(desired.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(a.GetType()), Address: a.GetAddress()})
	}

	return desired
}

func writesOf(r NodeApplyResult) []string {
	var out []string

	if r.MetadataApplied {
		out = append(out, "labels and annotations")
	}

	if r.AddressesUpdated {
		out = append(out, "status.addresses")
	}

	if r.ProviderIDSet {
		out = append(out, "providerID")
	}

	if r.SpecUpdated && !r.ProviderIDSet && !r.Initialized {
		out = append(out, "taints")
	}

	if r.Initialized {
		out = append(out, "uninitialized taint removed")
	}

	return out
}

func hasTaint(n *corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}

	return false
}

package k8ssink

import (
	"context"
	"strings"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// nodeStatusPrefix prefixes the ApplyStatus IDs of Nodes.
const nodeStatusPrefix = "node/"

// NodeSinkController applies every NodeTransform to its Node with a NodeApplier and records the outcome
// in an ApplyStatus. It computes nothing: the NodeTransform is the decision.
type NodeSinkController = qtransform.QController[*node.NodeTransform, *sink.ApplyStatus]

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

	return qtransform.NewQController(
		qtransform.Settings[*node.NodeTransform, *sink.ApplyStatus]{
			Name: "k8ssink.NodeSinkController",
			MapMetadataFunc: func(in *node.NodeTransform) *sink.ApplyStatus {
				return sink.NewApplyStatus(sink.NamespaceName, nodeStatusPrefix+in.Metadata().ID())
			},
			UnmapMetadataFunc: func(out *sink.ApplyStatus) *node.NodeTransform {
				return node.NewNodeTransform(node.NamespaceName, strings.TrimPrefix(out.Metadata().ID(), nodeStatusPrefix))
			},
			TransformFunc: s.apply,
		},
		qtransform.WithOutputKind(controller.OutputShared),
		qtransform.WithExtraMappedInput[*kube.KubeNode](qtransform.MapperSameID[*node.NodeTransform]()),
		qtransform.WithConcurrency(max(concurrency, 1)),
	)
}

type nodeSink struct {
	applier *NodeApplier
	nodes   corelisters.NodeLister
	// ruleEvents, when set, posts the skipped transformation rules.
	ruleEvents *NodeRuleEvents
}

func (s *nodeSink) apply(ctx context.Context, _ controller.Reader, logger *zap.Logger, nt *node.NodeTransform, out *sink.ApplyStatus) error {
	name := nt.Metadata().ID()
	decision := nt.TypedSpec().Value
	status := out.TypedSpec().Value
	status.Object = "Node/" + name

	current, err := s.nodes.Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			// The Node comes back through its KubeNode, which triggers this again.
			status.Error = "Node not found"

			if s.ruleEvents != nil {
				s.ruleEvents.Forget(name)
			}

			return nil
		}

		return err
	}

	if s.ruleEvents != nil {
		s.ruleEvents.Report(current, decision.GetSkippedRules(), decision.GetConflict())
	}

	if !decision.GetInitialize() {
		// Nothing is applied before the decision is complete: a half-initialized Node is worse than an
		// uninitialized one.
		status.Error = ""
		status.Initialized = !hasTaint(current, UninitializedTaintKey)

		return nil
	}

	result, err := s.applier.Apply(ctx, current, desiredNode(name, decision))

	status.Initialized = result.Node != nil && !hasTaint(result.Node, UninitializedTaintKey)

	if result.Writes > 0 || err != nil || status.GetAppliedVersion() == "" {
		status.AppliedVersion = nt.Metadata().Version().String()
		status.AppliedAt = timestamppb.Now()
		status.Writes = writesOf(result)
	}

	if err != nil {
		logger.Warn("failed to apply node", zap.String("node", name), zap.Int32("failures", status.ConsecutiveFailures+1), zap.Error(err))

		return failed(status, err)
	}

	status.ConsecutiveFailures = 0
	status.Error = ""

	if c := result.ProviderIDConflict; c != nil {
		status.Error = "the Node has providerID " + c.Current + ", talos-ccm decided " + c.Desired + ": left as it is"
	}

	if result.Initialized {
		metrics.NodeInitializationSeconds.Observe(time.Since(current.CreationTimestamp.Time).Seconds())
	}

	if result.Writes > 0 {
		logger.Info("node applied", zap.String("node", name), zap.Strings("writes", status.Writes), zap.Bool("initialized", result.Initialized))
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

// failed records a failed apply in its status and asks for a retry after a backoff that grows with the
// failures in a row. The status is written (the error stays visible), unlike with a plain error return.
func failed(status *specs.ApplyStatusSpec, err error) error {
	status.Error = err.Error()
	status.ConsecutiveFailures++

	return controller.NewRequeueInterval(retryAfter(status.ConsecutiveFailures))
}

// retryAfter is the backoff after consecutive failed applies of one Node: 1s doubling up to 30s, so that
// after an apiserver outage the Nodes waiting are written within half a minute of its return.
func retryAfter(failures int32) time.Duration {
	d := time.Second << min(max(failures-1, 0), 5)

	return min(d, 30*time.Second)
}

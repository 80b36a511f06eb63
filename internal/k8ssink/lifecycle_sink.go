package k8ssink

import (
	"context"
	"fmt"
	"slices"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/retry"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// LifecycleNodeClient is the part of the Node client the lifecycle sink uses.
type LifecycleNodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	Update(ctx context.Context, node *corev1.Node, opts metav1.UpdateOptions) (*corev1.Node, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// NodeLifecycleSinkController applies NodeLifecycle verdicts: the shutdown taint, and the deletion of stale
// Nodes. It decides nothing; the verdict is the decision.
type NodeLifecycleSinkController = SinkController[*node.NodeLifecycle]

// NewNodeLifecycleSinkController instantiates the lifecycle sink; concurrency bounds the Nodes written at
// once.
func NewNodeLifecycleSinkController(nodes LifecycleNodeClient, lister corelisters.NodeLister, events EventRecorder, concurrency uint) *NodeLifecycleSinkController {
	s := &lifecycleSink{nodes: nodes, lister: lister, events: events}

	return newSinkController(sinkSettings[*node.NodeLifecycle]{
		Name:        "k8ssink.NodeLifecycleSinkController",
		Kind:        sink.KindLifecycle,
		Object:      "Node",
		NewInput:    node.NewNodeLifecycle,
		Apply:       s.apply,
		Concurrency: concurrency,
		ExtraInputs: []qtransform.ControllerOption{
			qtransform.WithExtraMappedInput[*kube.KubeNode](qtransform.MapperFuncFromTyped[*kube.KubeNode](lifecycleDrift)),
		},
	})
}

type lifecycleSink struct {
	nodes  LifecycleNodeClient
	lister corelisters.NodeLister
	events EventRecorder
}

func (s *lifecycleSink) apply(ctx context.Context, _ controller.Reader, logger *zap.Logger, in *node.NodeLifecycle, _ *specs.ApplyStatusSpec) (outcome, error) {
	name := in.Metadata().ID()
	verdict := in.TypedSpec().Value

	current, err := s.lister.Get(name)
	if err != nil {
		return cacheMiss("Node", name, err)
	}

	switch {
	case verdict.GetDelete():
		if current.Spec.ProviderID == "" || isReady(current) {
			// The verdict was computed from a Node that has changed since: it is decided again.
			return untouched(), nil
		}

		err = s.nodes.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &current.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return failed(fmt.Errorf("failed to delete node %q: %w", name, err)), nil
		}

		s.events.Event(current, corev1.EventTypeWarning, "StaleNodeDeleted", verdict.GetReason())
		logger.Warn("stale node deleted", zap.String("node", name), zap.String("reason", verdict.GetReason()))

		return applied("deleted"), nil
	case verdict.GetShutdown() != hasTaint(current, kubekeys.TaintShutdown):
		if err = s.setShutdownTaint(ctx, current, verdict.GetShutdown()); err != nil {
			return failed(err), nil
		}

		write := "shutdown taint removed"

		if verdict.GetShutdown() {
			write = "shutdown taint added"
			s.events.Event(current, corev1.EventTypeNormal, "MachineShutdown", verdict.GetReason())
		} else {
			s.events.Event(current, corev1.EventTypeNormal, "MachineRunning", verdict.GetReason())
		}

		logger.Info("node shutdown taint changed", zap.String("node", name), zap.Bool("shutdown", verdict.GetShutdown()))

		return applied(write), nil
	default:
		return applied(), nil
	}
}

// setShutdownTaint adds or removes the shutdown taint by read-modify-write, retrying on conflicts; the
// taints of others are untouched.
func (s *lifecycleSink) setShutdownTaint(ctx context.Context, current *corev1.Node, shutdown bool) error {
	n := current.DeepCopy()

	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n.Spec.Taints = slices.DeleteFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == kubekeys.TaintShutdown })

		if shutdown {
			n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: kubekeys.TaintShutdown, Effect: corev1.TaintEffectNoSchedule})
		}

		// A nil list leaves managedFields as they are on the server (the cached copy has only talos-ccm's).
		n.ManagedFields = nil

		_, err := s.nodes.Update(ctx, n, metav1.UpdateOptions{FieldManager: DefaultFieldManager})
		if apierrors.IsConflict(err) {
			fresh, getErr := s.nodes.Get(ctx, n.Name, metav1.GetOptions{})
			if getErr != nil {
				return fmt.Errorf("failed to read node %q: %w", n.Name, getErr)
			}

			n = fresh
		}

		if err != nil {
			return fmt.Errorf("failed to update taints of node %q: %w", n.Name, err)
		}

		return nil
	})
}

func isReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}

	return false
}

package k8ssink

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// Event reasons of the pod CIDR sink.
const (
	// EventCIDRNotAvailable: no pod CIDR could be allocated to the Node (exhausted range, machine prefix too
	// small, ...).
	EventCIDRNotAvailable = "CIDRNotAvailable"
	// EventPodCIDRConflict: the Node's pod CIDR lies outside the ranges or overlaps another Node's.
	EventPodCIDRConflict = "PodCIDRConflict"
)

// PodCIDRNodeClient is the part of the Node client the pod CIDR sink uses.
type PodCIDRNodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// PodCIDRSinkController writes the pod CIDRs the allocator decided into spec.podCIDR and spec.podCIDRs of
// Nodes that have none (the API lets them be set once), and posts an Event on a Node whose pod CIDR cannot
// be allocated or is in conflict. It decides nothing: the IPAllocations are the decision.
type PodCIDRSinkController = SinkController[*kube.KubeNode]

// NewPodCIDRSinkController instantiates the pod CIDR sink. lister reads the Nodes from the informer cache the
// KubeNode source fills.
func NewPodCIDRSinkController(nodes PodCIDRNodeClient, lister corelisters.NodeLister, events EventRecorder, concurrency uint) *PodCIDRSinkController {
	s := &podCIDRSink{nodes: nodes, lister: lister, events: events}

	return newSinkController(sinkSettings[*kube.KubeNode]{
		Name:        "k8ssink.PodCIDRSinkController",
		Kind:        sink.KindPodCIDR,
		Object:      "Node",
		NewInput:    kube.NewKubeNode,
		Apply:       s.apply,
		Concurrency: concurrency,
		ExtraInputs: []qtransform.ControllerOption{
			qtransform.WithExtraMappedInput[*ipam.IPAllocation](mapAllocationToOwner("node", kube.NamespaceName, kube.KubeNodeType)),
		},
	})
}

// mapAllocationToOwner maps the allocations of one kind ("node", "service") to their owner's mirror.
func mapAllocationToOwner(kind string, ns resource.Namespace, typ resource.Type) qtransform.MapperFunc {
	return func(_ context.Context, _ *zap.Logger, _ controller.QRuntime, alloc controller.ReducedResourceMetadata) ([]resource.Pointer, error) {
		k, owner, _, ok := ipam.ParseAllocationID(alloc.ID())
		if !ok || k != kind {
			return nil, nil
		}

		return []resource.Pointer{resource.NewMetadata(ns, typ, owner, resource.VersionUndefined)}, nil
	}
}

type podCIDRSink struct {
	nodes  PodCIDRNodeClient
	lister corelisters.NodeLister
	events EventRecorder
}

func (s *podCIDRSink) apply(ctx context.Context, r controller.Reader, logger *zap.Logger, kn *kube.KubeNode, last *specs.ApplyStatusSpec) (outcome, error) {
	name := kn.Metadata().ID()

	var allocs []*specs.IPAllocationSpec

	for _, family := range []string{ipam.FamilyIPv4, ipam.FamilyIPv6} {
		res, err := stateread.Get[*ipam.IPAllocation](ctx, r, ipam.NodeAllocationID(name, family))
		if state.IsNotFoundError(err) {
			continue
		}

		if err != nil {
			return outcome{}, fmt.Errorf("failed to read the pod CIDR allocation of node %q: %w", name, err)
		}

		allocs = append(allocs, res.TypedSpec().Value)
	}

	if len(allocs) == 0 {
		return untouched(), nil // not decided yet
	}

	current, err := s.lister.Get(name)
	if err != nil {
		return cacheMiss("Node", name, err)
	}

	// Problems are posted once each: the ApplyStatus keeps the last one.
	problem, reason := allocationProblem(allocs)
	if problem != "" && problem != last.GetError() {
		s.events.Event(current, corev1.EventTypeWarning, reason, problem)
		logger.Warn("pod cidr not available", zap.String("node", name), zap.String("reason", problem))
	}

	desired := DesiredPodCIDRs(allocs, string(current.UID))
	if len(desired) == 0 || len(current.Spec.PodCIDRs) > 0 {
		return applied().withNote(problem), nil
	}

	if err = s.setPodCIDRs(ctx, current, desired); err != nil {
		logger.Warn("failed to set pod cidrs", zap.String("node", name), zap.Error(err))

		return failed(err), nil
	}

	logger.Debug("pod cidrs set", zap.String("node", name), zap.Strings("pod_cidrs", desired))

	return applied("spec.podCIDRs").withNote(problem), nil
}

// allocationProblem describes the allocations of a Node that failed or are in conflict, with the Event
// reason; empty when there is none.
func allocationProblem(allocs []*specs.IPAllocationSpec) (string, string) {
	var (
		problems []string
		reason   = EventCIDRNotAvailable
	)

	for _, a := range allocs {
		switch a.GetState() {
		case ipam.StateConflict:
			reason = EventPodCIDRConflict
		case ipam.StateFailed:
		default:
			continue
		}

		problems = append(problems, a.GetFamily()+": "+a.GetReason())
	}

	return strings.Join(problems, "; "), reason
}

// DesiredPodCIDRs returns the spec.podCIDRs a Node with the given UID gets from its allocations: the
// complete list, once every family is allocated to that Node; nil otherwise.
func DesiredPodCIDRs(allocs []*specs.IPAllocationSpec, uid string) []string {
	var podCIDRs []string

	for _, a := range allocs {
		if a.GetState() != ipam.StateAllocated || a.GetOwnerUid() != uid {
			return nil
		}

		if podCIDRs == nil {
			podCIDRs = a.GetNodePodCidrs()
		}
	}

	if len(podCIDRs) != len(allocs) {
		return nil
	}

	for _, a := range allocs {
		if !slices.Contains(podCIDRs, a.GetAddress()) || !slices.Equal(a.GetNodePodCidrs(), podCIDRs) {
			return nil
		}
	}

	return podCIDRs
}

// setPodCIDRs sets spec.podCIDR and spec.podCIDRs by a merge patch that carries the resourceVersion it was
// computed from, so that it applies only to a Node that still has none; on a conflict the Node is read
// again, and left alone when someone else set them meanwhile.
func (s *podCIDRSink) setPodCIDRs(ctx context.Context, current *corev1.Node, podCIDRs []string) error {
	node := current

	for range 5 {
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"resourceVersion": node.ResourceVersion},
			"spec":     map[string]any{"podCIDR": podCIDRs[0], "podCIDRs": podCIDRs},
		})
		if err != nil {
			return fmt.Errorf("failed to encode the pod CIDR patch: %w", err)
		}

		_, err = s.nodes.Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: DefaultFieldManager})
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("failed to set the pod CIDRs of node %q: %w", node.Name, err)
			}

			return nil
		}

		if node, err = s.nodes.Get(ctx, node.Name, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("failed to read node %q: %w", current.Name, err)
		}

		if node.UID != current.UID || len(node.Spec.PodCIDRs) > 0 {
			return nil // re-created, or set meanwhile: the allocator decides again from what it has
		}
	}

	return fmt.Errorf("failed to set the pod CIDRs of node %q: the Node keeps changing", current.Name)
}

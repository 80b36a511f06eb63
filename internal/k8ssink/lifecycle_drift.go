package k8ssink

import (
	"context"
	"fmt"
	"slices"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// lifecycleDrift maps a change of a Node's mirror to the Node's lifecycle verdict when the lifecycle sink
// has something to do for it (lifecycleWantsPass). A new verdict runs the sink by itself; a change of the
// Node runs it only when the Node no longer agrees with its verdict. The kubelet's and talos-ccm's own
// writes change every joining Node three or four times, and a pass for each would find nothing to do.
func lifecycleDrift(ctx context.Context, _ *zap.Logger, r controller.QRuntime, mirror *kube.KubeNode) ([]resource.Pointer, error) {
	id := mirror.Metadata().ID()

	verdict, err := stateread.Get[*node.NodeLifecycle](ctx, r, id)
	if state.IsNotFoundError(err) {
		// No verdict yet: its creation runs the sink.
		return nil, nil
	}

	if err != nil {
		return nil, fmt.Errorf("failed to read the lifecycle verdict of %q: %w", id, err)
	}

	status, err := stateread.Get[*sink.ApplyStatus](ctx, r, sink.ApplyStatusID(sink.KindLifecycle, id))
	if err != nil && !state.IsNotFoundError(err) {
		return nil, fmt.Errorf("failed to read the lifecycle apply status of %q: %w", id, err)
	}

	var last *specs.ApplyStatusSpec
	if status != nil {
		last = status.TypedSpec().Value
	}

	if !lifecycleWantsPass(verdict.TypedSpec().Value, mirror.TypedSpec().Value, last) {
		return nil, nil
	}

	return []resource.Pointer{verdict.Metadata()}, nil
}

// lifecycleWantsPass says whether a Node (its mirror) calls for a pass of the lifecycle sink: its verdict
// deletes it (whether it may depends on the Node), the shutdown taint is there and the verdict says the
// machine runs (or the other way round), or the last pass did not end cleanly (the Node was missing from
// the cache, say). No ApplyStatus (last is nil) is a clean record: a pass that ends otherwise writes one
// (saysSomething), and a verdict's creation runs the sink by itself.
func lifecycleWantsPass(verdict *specs.NodeLifecycleSpec, mirror *specs.KubeNodeSpec, last *specs.ApplyStatusSpec) bool {
	if last.GetError() != "" || last.GetConsecutiveFailures() > 0 {
		return true
	}

	if verdict.GetDelete() {
		return true
	}

	tainted := slices.ContainsFunc(mirror.GetTaints(), func(t *specs.Taint) bool { return t.GetKey() == kubekeys.TaintShutdown })

	return tainted != verdict.GetShutdown()
}

// Package node holds the controllers that decide what talos-ccm wants on each Kubernetes Node.
package node

import (
	"context"
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/xerrors"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/consumers"
	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/decision"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/nodetransform"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// NodeTransformController computes a NodeTransform for every KubeNode from the machine's Talos facts and
// the Config, with nodetransform.Build.
type NodeTransformController = decision.Controller[*kube.KubeNode, *node.NodeTransform]

// NewNodeTransformController instantiates the NodeTransform controller. consumers are the controllers
// that take the NodeTransforms as their primary input, whose finalizers the NodeTransforms carry.
func NewNodeTransformController(consumers ...resource.Finalizer) *NodeTransformController {
	t := &nodeTransformer{claims: newClaimRegistry(), consumers: consumers}

	return decision.New(decision.Settings[*kube.KubeNode, *node.NodeTransform]{
		Name:        nodeTransformName,
		NewOutput:   node.NewNodeTransform,
		Decide:      t.transform,
		Teardown:    t.teardown,
		Concurrency: decisionConcurrency,
		Options:     nodeTransformOptions(),
	})
}

// nodeTransformName is the NodeTransform controller's name, stored as the finalizer on the KubeNodes and
// as the owner of the NodeTransforms: never rename it.
const nodeTransformName = "node.NodeTransformController"

// nodeTransformOptions declare the NodeTransform controller's extra output, the NodeClaimRechecks, and its
// extra inputs: a Node's machine facts and claim recheck decide that Node again, the Config every Node.
func nodeTransformOptions() []decision.Option {
	return []decision.Option{
		decision.ExtraOutputs(controller.Output{Type: node.NodeClaimRecheckType, Kind: controller.OutputExclusive}),
		decision.SameIDInput[*node.NodeClaimRecheck](),
		decision.SameIDInput[*talos.PlatformMetadata](),
		decision.SameIDInput[*talos.MachineAddresses](),
		decision.SameIDInput[*talos.MachineStatus](),
		decision.MappedInput[*config.Config](allKubeNodes),
	}
}

// decisionConcurrency is how many Nodes a decision controller (NodeTransform, NodeLifecycle) computes at
// once. Each Node's decision is independent (the claims are bound under the registry's lock): while
// thousands of Nodes join, one worker would be one goroutine among the thousands of the machines' sessions
// and get as small a share of the CPU, and every request for a serving certificate waits for its Node's
// transform.
const decisionConcurrency = 4

// contestedRecheck is how often a NodeTransform whose machine, providerID or address another Node also
// claims is computed again: the claims are seen one Node at a time (after a restart, in any order), and
// the stronger claim wins once both were seen.
const contestedRecheck = 10 * time.Second

// nodeTransformer computes NodeTransforms, and holds every Node's claim on its machine, providerID and
// addresses.
type nodeTransformer struct {
	claims    *claimRegistry
	consumers []resource.Finalizer
}

func (t *nodeTransformer) transform(ctx context.Context, r controller.ReaderWriter, logger *zap.Logger, in *kube.KubeNode, previous, out *node.NodeTransform) error {
	cfg, err := stateread.Get[*config.Config](ctx, r, config.ActiveID)
	if err != nil {
		if state.IsNotFoundError(err) {
			return xerrors.NewTaggedf[qtransform.SkipReconcileTag]("no active config yet")
		}

		return fmt.Errorf("failed to read config: %w", err)
	}

	id := in.Metadata().ID()

	pm, err := stateread.Optional[*talos.PlatformMetadata](ctx, r, id)
	if err != nil {
		return err
	}

	ma, err := stateread.Optional[*talos.MachineAddresses](ctx, r, id)
	if err != nil {
		return err
	}

	ms, err := stateread.Optional[*talos.MachineStatus](ctx, r, id)
	if err != nil {
		return err
	}

	var (
		pmSpec *specs.PlatformMetadataSpec
		maSpec *specs.MachineAddressesSpec
		msSpec *specs.MachineStatusSpec
	)

	if pm != nil {
		pmSpec = pm.TypedSpec().Value
	}

	if ma != nil {
		maSpec = ma.TypedSpec().Value
	}

	if ms != nil {
		msSpec = ms.TypedSpec().Value
	}

	spec, requeue := nodetransform.Build(nodetransform.Input{
		Now:       time.Now(),
		NodeName:  id,
		Node:      in.TypedSpec().Value,
		Platform:  pmSpec,
		Addresses: maSpec,
		Status:    msSpec,
		Config:    cfg.TypedSpec().Value,
	})

	if spec.GetVerified() {
		current := nodetransform.PointerConflict(id, msSpec) == ""

		conflict, contested, displaced := t.claims.bind(claimOf(id, in.TypedSpec().Value, spec, current))
		if conflict != "" {
			nodetransform.Refuse(spec, conflict)
		}

		if err = askRecheck(ctx, r, id, displaced); err != nil {
			return err
		}

		if contested && (requeue == 0 || requeue > contestedRecheck) {
			requeue = contestedRecheck
		}
	} else {
		t.claims.remove(id)
	}

	if conflict := spec.GetConflict(); conflict != "" && conflict != previous.TypedSpec().Value.GetConflict() {
		metrics.NodeIdentityConflicts.Inc()
		logger.Warn("node not bound to its machine", zap.String("node", id), zap.String("conflict", conflict))
	}

	out.TypedSpec().Value = spec
	consumers.Hold(out, t.consumers)

	if requeue > 0 {
		logger.Debug("node transform waits", zap.String("node", id), zap.String("pending", spec.GetPending()), zap.Duration("recheck_in", requeue))

		return controller.NewRequeueInterval(requeue)
	}

	return nil
}

// teardown lets a Node that goes away go: its claims and its claim recheck.
func (t *nodeTransformer) teardown(ctx context.Context, rw controller.ReaderWriter, _ *zap.Logger, in *kube.KubeNode) error {
	t.claims.remove(in.Metadata().ID())

	err := rw.Destroy(ctx, node.NewNodeClaimRecheck(node.NamespaceName, in.Metadata().ID()).Metadata())
	if err != nil && !state.IsNotFoundError(err) {
		return fmt.Errorf("failed to destroy the claim recheck of node %q: %w", in.Metadata().ID(), err)
	}

	return nil
}

// askRecheck asks for the NodeTransforms of the Nodes displaced by claimer's claim to be decided again: each
// one's NodeClaimRecheck, an input of this controller, counts the request.
func askRecheck(ctx context.Context, rw controller.ReaderWriter, claimer string, displaced []string) error {
	for _, name := range displaced {
		if err := safe.WriterModify(ctx, rw, node.NewNodeClaimRecheck(node.NamespaceName, name), func(r *node.NodeClaimRecheck) error {
			r.TypedSpec().Value.Requests++
			r.TypedSpec().Value.DisplacedBy = claimer

			return nil
		}); err != nil {
			return fmt.Errorf("failed to ask for node %q's transform again: %w", name, err)
		}
	}

	return nil
}

// claimOf is what a Node with a verified NodeTransform claims: its machine, the providerID its machine
// gives, and its InternalIPs.
// current is false while the Node keeps facts read before, its kubelet pointing at another machine.
//
// The providerID in the Node's spec is its kubelet's claim (a kubelet may register its Node with any
// providerID): it counts as carried only when it is the one the verified machine gives, and another one
// is no claim at all. Counting it would let a Node registered with a victim's predictable providerID
// (talos://metal/<IP>) before the victim joins hold it, and keep the victim uninitialized.
func claimOf(name string, kn *specs.KubeNodeSpec, spec *specs.NodeTransformSpec, current bool) Claim {
	initialized := !kn.GetUninitialized()
	claim := Claim{
		Node:    name,
		Created: kn.GetCreated().AsTime(),
		Current: current,
		Keys:    map[claimKey]bool{{kind: claimMachine, value: spec.GetMachine()}: initialized},
	}

	if id := spec.GetProviderId(); id != "" {
		claim.Keys[claimKey{kind: claimProviderID, value: id}] = kn.GetProviderId() == id
	}

	for _, a := range spec.GetAddresses() {
		if a.GetType() == nodeaddress.AddressInternalIP {
			claim.Keys[claimKey{kind: claimIP, value: a.GetAddress()}] = initialized
		}
	}

	return claim
}

// allKubeNodes maps a change of the Config to every Node: the rules apply to all.
func allKubeNodes(ctx context.Context, _ *zap.Logger, r controller.Reader, _ *config.Config) ([]resource.ID, error) {
	nodes, err := safe.ReaderListAll[*kube.KubeNode](ctx, r)
	if err != nil {
		return nil, fmt.Errorf("failed to list nodes: %w", err)
	}

	ids := make([]resource.ID, 0, nodes.Len())

	for n := range nodes.All() {
		ids = append(ids, n.Metadata().ID())
	}

	return ids, nil
}

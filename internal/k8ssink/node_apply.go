package k8ssink

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
)

// DefaultFieldManager is the field manager of every write of talos-ccm.
const DefaultFieldManager = "talos-ccm"

// NodeClient is the part of the Kubernetes Node client the applier uses;
// clientset.CoreV1().Nodes() implements it.
type NodeClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	Update(ctx context.Context, node *corev1.Node, opts metav1.UpdateOptions) (*corev1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// NodeApplierOptions tunes a NodeApplier; the zero value is the default.
type NodeApplierOptions struct {
	// FieldManager names the writer in managedFields; empty means DefaultFieldManager.
	FieldManager string
	// ConflictBackoff bounds the retries of the Node update on a conflict; zero means
	// retry.DefaultRetry.
	ConflictBackoff wait.Backoff
}

// NodeApplier brings Nodes to the state talos-ccm decided for them, in at most two writes per Node: one
// of status.addresses, then one update of the Node object that carries everything else (labels,
// annotations, providerID, taints, and the removal of the uninitialized taint).
//
// The object write is a read-modify-write update, not a server-side apply, because it has to be one
// request guarded by the version it was computed from, and an update is that by construction: it
// carries the resourceVersion of the Node it modified, so a write based on a stale version fails with a
// conflict and is computed again from a fresh read. The taints of others (kube-controller-manager adds
// and removes its not-ready and unreachable taints at any time) are never overwritten, and a providerID
// set meanwhile is never replaced. One apply for everything would need the same guard (the taint list
// is atomic, so the apply carries all of it), and more besides: an applier that leaves out a field it
// owns has the server remove it, so every apply would carry the whole taint list and the providerID,
// and an apply cannot remove the owned-taints annotation that earlier versions wrote by an update.
//
// With an update, what talos-ccm owns is not in managedFields: the caller keeps the record (OwnedKeys, in
// talos-ccm's state), passes it to Apply and records what Apply returns. A copy goes on the Node in three
// annotations (kubekeys.AnnotationOwnedLabels, kubekeys.AnnotationOwnedAnnotations, kubekeys.AnnotationOwnedTaints), written in the
// same request as what they list, for people and tools; they are never read as the record, since the
// kubelet can write them.
//
// It keeps no state between calls: it is safe for concurrent use, for different Nodes.
type NodeApplier struct {
	nodes   NodeClient
	logger  *zap.Logger
	manager string
	backoff wait.Backoff
}

// NodeApplyResult is what one Apply wrote, and what it found.
type NodeApplyResult struct {
	// Node is the Node as returned by the last write, or the current Node when nothing was
	// written (or a fresher one, read after a conflict).
	Node *corev1.Node
	// ProviderIDConflict is set when the Node has a providerID other than the desired one; the
	// Node's providerID is left as it is, and the rest of the desired state is applied.
	ProviderIDConflict *ProviderIDConflict
	// Writes counts the write requests that succeeded: at most two, the status write and the object
	// update.
	Writes int
	// Conflicts counts the object updates that were refused on a conflict and retried.
	Conflicts int
	// MetadataApplied is true when the object update changed the labels or annotations talos-ccm
	// owns, or the record of which it owns.
	MetadataApplied bool
	// AddressesUpdated is true when status.addresses were written.
	AddressesUpdated bool
	// SpecUpdated is true when the object update changed the providerID, the taints or the
	// owned-taints annotation.
	SpecUpdated bool
	// ProviderIDSet is true when this Apply set the providerID.
	ProviderIDSet bool
	// Initialized is true when this Apply removed the uninitialized taint.
	Initialized bool
	// Owned is what talos-ccm owns on Node once Apply succeeded: the record to keep, and pass to the next
	// Apply. It is the zero value when Apply failed: the record passed in still holds.
	Owned OwnedKeys
	// Ignored are the entries of the Node's ownership annotations that talos-ccm never recorded and does
	// not desire ("label KEY", "annotation KEY", "taint KEY:Effect"): left alone, and to be reported, since
	// a kubelet may have forged them.
	Ignored []string
	// Superseded are the resourceVersions the Node had during Apply before the one of Node: the version it
	// started from, those its earlier writes returned, and those read after a conflict. A cache that still
	// holds one of them has not caught up with Apply's writes.
	Superseded []string
}

// supersede records that the Node moved on from version rv (see NodeApplyResult.Superseded).
func (r *NodeApplyResult) supersede(rv string) {
	if rv != "" && !slices.Contains(r.Superseded, rv) {
		r.Superseded = append(r.Superseded, rv)
	}
}

// advance makes n, returned by a write or read during Apply, the Node of the result.
func (r *NodeApplyResult) advance(n *corev1.Node) {
	if r.Node != nil && n != nil && r.Node.ResourceVersion != n.ResourceVersion {
		r.supersede(r.Node.ResourceVersion)
	}

	r.Node = n
}

// NewNodeApplier returns an applier writing through nodes (clientset.CoreV1().Nodes()).
func NewNodeApplier(nodes NodeClient, logger *zap.Logger, opts NodeApplierOptions) *NodeApplier {
	if logger == nil {
		logger = zap.NewNop()
	}

	if opts.FieldManager == "" {
		opts.FieldManager = DefaultFieldManager
	}

	if opts.ConflictBackoff.Steps == 0 {
		opts.ConflictBackoff = retry.DefaultRetry
	}

	return &NodeApplier{
		nodes:   nodes,
		logger:  logger,
		manager: opts.FieldManager,
		backoff: opts.ConflictBackoff,
	}
}

// Apply brings the Node to the desired state. current is the Node as last seen, typically from an
// informer cache; owned is what talos-ccm recorded as its own on it (see OwnedKeys), the keys it removes
// when they are no longer desired. When the Node already matches desired, Apply issues no request at all. Otherwise it writes, in order and stopping at the first failure:
//
//  1. status.addresses, by a JSON merge patch of the status subresource;
//  2. labels, annotations, providerID (only if the Node has none), the taints talos-ccm owns and the
//     removal of the uninitialized taint, by one update of the version returned by the previous write
//     (read again only after a conflict).
//
// So the uninitialized taint goes away in the last write, atomically with the labels, annotations and
// providerID, and only after the addresses were written. The result reports what was written, even on
// an error.
func (a *NodeApplier) Apply(ctx context.Context, current *corev1.Node, desired NodeDesired, owned OwnedKeys) (NodeApplyResult, error) {
	result := NodeApplyResult{Node: current}

	if err := desired.Validate(); err != nil {
		return result, fmt.Errorf("failed to validate desired node %q: %w", desired.Name, err)
	}

	if current == nil || current.Name != desired.Name {
		return result, fmt.Errorf("failed to apply node %q: current node is missing or has another name", desired.Name)
	}

	plan := planNode(current, desired, owned)

	// Known before any write, so that they are reported even when a write fails.
	result.ProviderIDConflict = plan.object.spec.providerIDConflict
	result.Ignored = plan.object.ignored()

	// Each line names the Node itself: a logger With the field would encode it at every Apply, for lines
	// that are mostly Debug and off.
	logger, nodeField := a.logger, zap.String("node", desired.Name)

	if plan.addresses != nil {
		node, err := a.patchAddresses(ctx, desired.Name, plan.addresses)
		if err != nil {
			return result, fmt.Errorf("failed to patch addresses of node %q: %w", desired.Name, err)
		}

		shareUID(node, current)
		result.advance(node)
		result.Writes++
		result.AddressesUpdated = true

		logger.Debug("patched node addresses", nodeField, zap.Int("addresses", len(plan.addresses)))
	}

	if err := a.updateObject(ctx, desired, owned, plan.object, &result); err != nil {
		return result, fmt.Errorf("failed to update node %q: %w", desired.Name, err)
	}

	if result.MetadataApplied {
		logger.Debug("updated node labels and annotations", nodeField, zap.Int("labels", len(desired.Labels)), zap.Int("annotations", len(desired.Annotations)))
	}

	if result.ProviderIDConflict != nil {
		logger.Debug("node has another provider id", nodeField, zap.String("current", result.ProviderIDConflict.Current), zap.String("desired", result.ProviderIDConflict.Desired))
	}

	if result.Initialized {
		logger.Info("node initialized", nodeField, zap.String("provider_id", result.Node.Spec.ProviderID))
	}

	return result, nil
}

// addressesPatch is a JSON merge patch that replaces status.addresses as a whole.
type addressesPatch struct {
	Status struct {
		Addresses []corev1.NodeAddress `json:"addresses"`
	} `json:"status"`
}

// patchAddresses replaces the Node's status.addresses with addresses. A strategic merge patch
// would merge the list by address type and so keep only one address of each type.
func (a *NodeApplier) patchAddresses(ctx context.Context, name string, addresses []corev1.NodeAddress) (*corev1.Node, error) {
	var patch addressesPatch

	patch.Status.Addresses = addresses

	data, err := json.Marshal(patch)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal addresses patch: %w", err)
	}

	return a.nodes.Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: a.manager}, "status")
}

// updateObject writes the object plan with a read-modify-write update of result.Node, the freshest
// version known. first is the plan computed against current: it is reused while result.Node is
// current, and recomputed against any newer version, so that no write happens when nothing is to
// change. The Node is read again only after a conflict.
func (a *NodeApplier) updateObject(ctx context.Context, desired NodeDesired, owned OwnedKeys, first objectPlan, result *NodeApplyResult) error {
	base := result.Node
	plan := first

	if result.Writes > 0 {
		plan = planObject(base, desired, owned)
	}

	attempt := 0

	return retry.RetryOnConflict(a.backoff, func() error {
		if attempt > 0 {
			result.Conflicts++

			fresh, err := a.nodes.Get(ctx, desired.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("failed to get node after a conflict: %w", err)
			}

			shareUID(fresh, base)
			result.advance(fresh)
			base = fresh
			plan = planObject(base, desired, owned)
		}

		attempt++

		result.ProviderIDConflict = plan.spec.providerIDConflict
		result.Ignored = plan.ignored()

		if plan.empty() {
			result.Owned = plan.owned

			return nil
		}

		node := base.DeepCopy()
		plan.applyTo(node)

		// A nil list leaves managedFields as they are on the server; an object read from a cache
		// that strips them would otherwise reset them.
		node.ManagedFields = nil

		// node carries base's resourceVersion: the server refuses the update if the Node changed since.
		updated, err := a.nodes.Update(ctx, node, metav1.UpdateOptions{FieldManager: a.manager})
		if err != nil {
			// Unwrapped: RetryOnConflict recognizes the conflict by the API error; Apply wraps it.
			return err
		}

		result.advance(updated)
		result.Writes++
		result.MetadataApplied = plan.metadata.changed()
		result.SpecUpdated = !plan.spec.empty()
		result.ProviderIDSet = plan.spec.providerID != ""
		result.Initialized = plan.spec.initialize
		result.Owned = plan.owned

		return nil
	})
}

// shareUID makes answer, a Node the apiserver returned, hold the uid of cached, the Node as last seen, when it
// is the same Node. The uid of the Node an apply is computed from goes into the record of what talos-ccm owns
// (OwnedKeys, kept in the state for as long as the Node lives): the answer's own copy would be one more
// string per Node, next to the cached Node's.
func shareUID(answer, cached *corev1.Node) {
	if answer != nil && cached != nil && answer.UID == cached.UID {
		answer.UID = cached.UID
	}
}

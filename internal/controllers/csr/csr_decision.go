// Package csr holds the controller that decides about kubelet serving certificate requests.
package csr

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/xerrors"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/consumers"
	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/decision"
	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/mappers"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	noderes "github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// CSRDecisionOptions tune the CSRDecision controller.
type CSRDecisionOptions struct {
	// Now is the clock the decisions are stamped with; nil means time.Now.
	Now func() time.Time
	// TalosFacts says that a Talos source runs: rule 8 then waits for each machine's addresses. Without
	// one, rule 8 is skipped and the decisions say so.
	TalosFacts bool
	// ServiceCIDRsFromTalos says that a ControllerManagerConfig source runs: with no serviceCIDRs in the
	// configuration, rule 9 then waits for the Service ranges Talos reports.
	ServiceCIDRsFromTalos bool
	// APIServerSource says that the KubeAPIServer source runs: rule 9 then waits for the apiserver's
	// endpoints.
	APIServerSource bool
	// Consumers are the controllers that take the decisions as their primary input, whose finalizers the
	// decisions carry.
	Consumers []resource.Finalizer
}

// CSRDecisionController decides about every pending kubelet serving certificate request (KubeCSR) from the
// requesting node's KubeNode, its machine's MachineAddresses and the Config, with DecideCSR.
type CSRDecisionController = decision.Controller[*kube.KubeCSR, *csrres.CSRDecision]

// NewCSRDecisionController instantiates the CSRDecision controller.
func NewCSRDecisionController(opts CSRDecisionOptions) *CSRDecisionController {
	if opts.Now == nil {
		opts.Now = time.Now
	}

	d := &csrDecider{opts: opts, index: newRequesterIndex(opts.Now), parsed: newParsedRequests(maxParsedRequests), budgets: newRequestBudgets()}

	// byRequester maps a node's resource to its newest request, everyHead every requester's newest request.
	byRequester := func(id resource.ID) []resource.Pointer { return d.index.requests(NodeUserPrefix + id) }
	everyHead := func(resource.ID) []resource.Pointer { return d.index.requests("") }

	return decision.New(decision.Settings[*kube.KubeCSR, *csrres.CSRDecision]{
		Name:      "csr.CSRDecisionController",
		NewOutput: csrres.NewCSRDecision,
		Decide:    d.transform,
		Teardown: func(_ context.Context, _ controller.ReaderWriter, _ *zap.Logger, in *kube.KubeCSR) error {
			d.index.remove(in.Metadata().ID(), in.TypedSpec().Value.GetUsername())
			d.parsed.forget(in.Metadata().ID())

			return nil
		},
		// Decisions are independent of each other (a request and its siblings are re-decided when either
		// changes), and each is persisted: several at once keep approvals fast while thousands of nodes join.
		Concurrency: decisionConcurrency,
		Options: []decision.Option{
			// A change of a node's Node, NodeTransform or machine addresses decides that node's newest request
			// again.
			mappers.Keys[*kube.KubeNode](byRequester),
			mappers.Keys[*noderes.NodeTransform](byRequester),
			mappers.Keys[*talos.MachineAddresses](byRequester),
			// The configuration and the facts of rule 9 are the same for every request: a change decides every
			// head again.
			mappers.Keys[*config.Config](everyHead),
			mappers.Keys[*talos.ControllerManagerConfig](everyHead),
			mappers.Keys[*kube.KubeAPIServer](everyHead),
			mappers.Keys[*kube.KubeSync](func(id resource.ID) []resource.Pointer {
				if id != kube.APIServerSyncID {
					return nil
				}

				return everyHead(id)
			}),
		},
	})
}

// decisionConcurrency is how many requests are decided at once.
const decisionConcurrency = 16

// How soon a waiting request is decided again, to find whether a newer request superseded it: for a
// requester that files several requests a minute, and for any other.
const (
	supersededRecheck = 2 * time.Second
	waitingRecheck    = 30 * time.Second
)

type csrDecider struct {
	index   *requesterIndex
	parsed  *parsedRequests
	budgets *requestBudgets
	opts    CSRDecisionOptions
}

func (d *csrDecider) transform(ctx context.Context, r controller.ReaderWriter, logger *zap.Logger, in *kube.KubeCSR, last, out *csrres.CSRDecision) error {
	name := in.Metadata().ID()
	request := in.TypedSpec().Value

	// Before the config, the Node and the machine are read (supersededBy records the request in the index):
	// a change of any of them from now on decides this request again. A request skipped for want of a
	// config is thus decided once the config comes, which maps to the heads of the index only.
	supersededBy, err := d.supersededBy(ctx, r, name, request)
	if err != nil {
		return err
	}

	cfg, err := stateread.Get[*config.Config](ctx, r, config.ActiveID)
	if err != nil {
		if state.IsNotFoundError(err) {
			return xerrors.NewTaggedf[qtransform.SkipReconcileTag]("no active config yet")
		}

		return fmt.Errorf("failed to read config: %w", err)
	}

	// Superseded is final: once a newer request of the same requester was seen, this one is denied, even
	// when the newer one is approved and leaves before the denial is written (the kubelet waits for its
	// newest request only). A node that retries while it waits to be initialized thus gets one certificate,
	// not one per retry, and keeps at most one pending request, with its bytes, in talos-ccm's caches.
	if previous := last.TypedSpec().Value.GetSupersededBy(); previous != "" && supersededBy == "" {
		supersededBy = previous
	}

	input := DecisionInput{
		Now:          d.opts.Now(),
		CSR:          request,
		Config:       cfg.TypedSpec().Value,
		SupersededBy: supersededBy,
		TalosFacts:   d.opts.TalosFacts,
	}

	// Only the requester's newest request costs a token, and only its first decision in full.
	var busy bool
	if supersededBy == "" {
		input.Throttled, busy = d.budgets.take(request.GetUsername(), name, RequestsPerMinute(input.Config), input.Now)
	}

	if supersededBy == "" && input.Throttled == 0 {
		if err = d.readFacts(ctx, r, &input); err != nil {
			return err
		}

		input.Parsed = d.parsed.get(name, request.GetRequest())
	}

	decision, recheck := DecideCSR(input)
	decision.InputVersion = csrres.InputVersion(in)

	previous := last.TypedSpec().Value
	if sameDecision(previous, decision) {
		// The decision stands: it keeps the time it was first reached, and nothing is written.
		decision.DecidedAt = previous.GetDecidedAt()
	}

	if previous.GetVerdict() != decision.GetVerdict() {
		countDecision(decision)

		// Debug: what an operator acts on is the verdict applied, which the CSR sink logs (approved at Info,
		// denied as a Warning, with the reason).
		logger.Debug("csr decided",
			zap.String("csr", name), zap.String("node", decision.GetNode()), zap.String("verdict", decision.GetVerdict()),
			zap.String("reason", decision.GetReason()))
	}

	out.TypedSpec().Value = decision
	consumers.Hold(out, d.opts.Consumers)

	// A request that waits is decided again when what it waits for changes, which it may never do for a
	// requester whose Node is never initialized. Nothing decides it again when a newer request supersedes
	// it (the controller cannot queue another request), so a waiting request is decided again after a
	// while, to be denied and leave the caches if it was superseded meanwhile: shortly for a requester that
	// files several requests a minute, and twice a minute otherwise (a decision in full of a request that
	// was read already costs a few reads of the state).
	if recheck == 0 && decision.GetVerdict() == csrres.VerdictWait {
		recheck = waitingRecheck
		if busy {
			recheck = supersededRecheck
		}
	}

	if recheck > 0 {
		return controller.NewRequeueInterval(recheck)
	}

	return nil
}

// readFacts reads what a request that is not superseded is decided from: rule 9's facts, and the requesting
// node's Node, machine addresses and NodeTransform (with Talos facts).
func (d *csrDecider) readFacts(ctx context.Context, r controller.Reader, input *DecisionInput) error {
	var err error

	if input.Reserved, err = d.reservedFacts(ctx, r, input.Config); err != nil {
		return err
	}

	nodeName, ok := NodeName(input.CSR.GetUsername())
	if !ok {
		return nil
	}

	node, err := stateread.Running[*kube.KubeNode](ctx, r, nodeName)
	if err != nil {
		return err
	}

	if node != nil {
		input.Node = node.TypedSpec().Value
	}

	if !d.opts.TalosFacts {
		return nil
	}

	machine, err := stateread.Running[*talos.MachineAddresses](ctx, r, nodeName)
	if err != nil {
		return err
	}

	if machine != nil {
		input.Machine = machine.TypedSpec().Value
	}

	transform, err := stateread.Running[*noderes.NodeTransform](ctx, r, nodeName)
	if err != nil || transform == nil {
		return err
	}

	spec := transform.TypedSpec().Value
	input.Verified = spec.GetVerified() && spec.GetInitialize()
	input.VerifiedAddresses = spec.GetAddresses()
	input.Unverified = spec.GetConflict()

	if input.Unverified == "" {
		input.Unverified = spec.GetPending()
	}

	return nil
}

// sameDecision compares two decisions except for the time they were reached. previous is shared with the
// state and not changed; next, the caller's own, gets previous's time for the comparison and its own back
// after it, so that no decision is copied to be compared.
func sameDecision(previous, next *specs.CSRDecisionSpec) bool {
	if previous == nil || next == nil {
		return previous == next
	}

	decidedAt := next.DecidedAt
	next.DecidedAt = previous.DecidedAt
	same := previous.EqualVT(next)
	next.DecidedAt = decidedAt

	return same
}

func countDecision(decision *specs.CSRDecisionSpec) {
	metrics.CSRDecisions.WithLabelValues(decision.GetVerdict()).Inc()

	if decision.GetVerdict() != csrres.VerdictDeny {
		return
	}

	for _, rule := range decision.GetRules() {
		if rule.GetResult() == csrres.ResultFail && denies(rule.GetNumber()) {
			metrics.CSRRuleFailures.WithLabelValues(strconv.Itoa(int(rule.GetNumber())) + "-" + rule.GetName()).Inc()
		}
	}
}

// supersededBy returns the request that supersedes this one, or "" when this one is its requester's newest
// pending request and is decided in full (requesterIndex.observe). It costs O(1) whatever the number of
// siblings: a node that files thousands of requests delays no other node. A request answered from the
// memory of superseded requests is released from it once its persisted decision names the superseder.
func (d *csrDecider) supersededBy(ctx context.Context, r controller.Reader, name string, request *specs.KubeCSRSpec) (string, error) {
	decidedHead, err := d.decidedHead(ctx, r, name, request.GetUsername(), request.GetCreated().AsTime())
	if err != nil {
		return "", err
	}

	by, remembered := d.index.observe(name, request.GetUsername(), request.GetCreated().AsTime(), decidedHead)
	if !remembered {
		return by, nil
	}

	previous, err := stateread.Get[*csrres.CSRDecision](ctx, r, name)

	switch {
	case err == nil && previous.TypedSpec().Value.GetSupersededBy() != "":
		d.index.confirm(name, request.GetUsername())
	case err != nil && !state.IsNotFoundError(err):
		return "", fmt.Errorf("failed to read the decision about %s: %w", name, err)
	}

	return by, nil
}

// decidedHead returns the head of the requester of request name (created at created) when its decision
// approves or denies it (see requesterIndex.observe), "" otherwise. Only a request of the head's second
// needs it: only then does the state hold a read for it.
func (d *csrDecider) decidedHead(ctx context.Context, r controller.Reader, name, username string, created time.Time) (string, error) {
	head, headCreated := d.index.head(username)
	if head == "" || head == name || !created.Equal(headCreated) {
		return "", nil
	}

	decision, err := stateread.Get[*csrres.CSRDecision](ctx, r, head)

	switch {
	case state.IsNotFoundError(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("failed to read the decision about %s: %w", head, err)
	}

	if verdict := decision.TypedSpec().Value.GetVerdict(); verdict == csrres.VerdictApprove || verdict == csrres.VerdictDeny {
		return head, nil
	}

	return "", nil
}

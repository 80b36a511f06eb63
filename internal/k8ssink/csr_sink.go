package k8ssink

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// CSRSinkController carries out every CSRDecision: it approves or denies the request through the approval
// subresource, posts Events (on the request, and on the Node for a denial) and records a pass that failed
// or has a problem to report in an ApplyStatus (the request shows the condition written). A wait verdict
// leaves the request pending. It decides nothing: the CSRDecision is the
// decision.
type CSRSinkController = SinkController[*csr.CSRDecision]

// NewCSRSinkController instantiates the CSR sink. requests and nodes read from the informer caches the
// sources fill; events posts the Events; concurrency bounds the requests approved or denied at once.
func NewCSRSinkController(
	applier *CSRApplier, requests certlisters.CertificateSigningRequestLister, nodes corelisters.NodeLister, events EventRecorder, concurrency uint,
) *CSRSinkController {
	s := &csrSink{applier: applier, requests: requests, nodes: nodes, events: events, applied: map[resource.ID]writtenCondition{}}

	return newSinkController(sinkSettings[*csr.CSRDecision]{
		Name:     "k8ssink.CSRSinkController",
		Kind:     sink.KindCSR,
		Object:   "CertificateSigningRequest",
		NewInput: csr.NewCSRDecision,
		Apply:    s.apply,
		Teardown: func(_ context.Context, _ controller.ReaderWriter, _ *zap.Logger, in *csr.CSRDecision) error {
			s.forget(in.Metadata().ID())

			return nil
		},
		Concurrency: concurrency,
		// A request shows the condition written on it (and the KubeCSR mirror, its state): an ApplyStatus
		// per request approved would only repeat it. The sink remembers the conditions it wrote itself.
		ProblemsOnly: true,
		ExtraInputs: []qtransform.ControllerOption{
			// Read to check that the decision is of the request as it is now. A change of the request is not
			// a reason to run: the decision controller decides the request again (its input version changes
			// with it), and the new decision runs the sink. Three mirror changes per request (its creation,
			// its approval, its teardown) would each cost a pass and a slot in the sink's queue.
			qtransform.WithExtraMappedDestroyReadyInput[*kube.KubeCSR](qtransform.MapperSameID[*csr.CSRDecision]()),
		},
	})
}

type csrSink struct {
	applier  *CSRApplier
	requests certlisters.CertificateSigningRequestLister
	nodes    corelisters.NodeLister
	events   EventRecorder

	mu sync.Mutex
	// applied holds the condition written on each request whose decision is in the state, so that a newer
	// version of the same decision writes nothing while the cache shows the request pending. It goes with
	// the decision; after a restart the cache shows the condition (applicable).
	applied map[resource.ID]writtenCondition
}

// writtenCondition is a condition the CSR sink wrote on a request, and the request's uid.
type writtenCondition struct {
	uid  string
	cond certificatesv1.RequestConditionType
}

// wrote says whether the sink wrote the condition of decision on the request name.
func (s *csrSink) wrote(name resource.ID, decision *specs.CSRDecisionSpec, cond certificatesv1.RequestConditionType) bool {
	s.mu.Lock()
	defer s.mu.Unlock()

	return s.applied[name] == writtenCondition{uid: decision.GetCsrUid(), cond: cond}
}

// remember records the condition written on the request name, of the decision's uid.
func (s *csrSink) remember(name resource.ID, decision *specs.CSRDecisionSpec, cond certificatesv1.RequestConditionType) {
	s.mu.Lock()
	defer s.mu.Unlock()

	s.applied[name] = writtenCondition{uid: decision.GetCsrUid(), cond: cond}
}

// forget drops what was written on the request of a decision that goes away.
func (s *csrSink) forget(name resource.ID) {
	s.mu.Lock()
	defer s.mu.Unlock()

	delete(s.applied, name)
}

func (s *csrSink) apply(ctx context.Context, r controller.Reader, logger *zap.Logger, in *csr.CSRDecision, last *specs.ApplyStatusSpec) (outcome, error) {
	name := in.Metadata().ID()
	decision := in.TypedSpec().Value

	if decision.GetVerdict() != csr.VerdictApprove && decision.GetVerdict() != csr.VerdictDeny {
		// Nothing to apply: the request stays pending until it is decided again.
		return skipped(""), nil
	}

	mirror, err := stateread.Get[*kube.KubeCSR](ctx, r, name)
	if err != nil && !state.IsNotFoundError(err) {
		return outcome{}, fmt.Errorf("failed to read certificate request mirror %q: %w", name, err)
	}

	if mirror == nil || mirror.Metadata().Phase() != resource.PhaseRunning || csr.InputVersion(mirror) != decision.GetInputVersion() {
		// The decision was not computed from the request as it is now (it is from before a restart, or the
		// request changed): the decision controller computes it again, which triggers this again.
		return untouched(), nil
	}

	if cond, ok := DecisionCondition(decision, time.Time{}); ok && (s.wrote(name, decision, cond.Type) || slices.Contains(last.GetWrites(), string(cond.Type)) && last.GetError() == "") {
		// Applied already: this is a newer version of the same decision (the finalizer this sink adds, say).
		// A condition is never taken back, and the cache may not show it yet: nothing is read or written.
		return alreadyApplied(), nil
	}

	current, err := s.requests.Get(name)
	if err != nil {
		return cacheMiss("CertificateSigningRequest", name, err)
	}

	now := time.Now()

	result, err := s.applier.Apply(ctx, current, decision, now)
	if err != nil {
		logger.Warn("failed to apply csr decision", zap.String("csr", name), zap.Int32("failures", last.GetConsecutiveFailures()+1), zap.Error(err))

		return failed(err), nil
	}

	if result.Condition == "" {
		logger.Debug("csr decision not applied", zap.String("csr", name), zap.String("why", result.Skipped))

		return applied(), nil
	}

	s.remember(name, decision, result.Condition)
	s.post(result.CSR, decision, result.Condition)

	switch {
	case decision.GetSupersededBy() != "":
		logger.Info("csr superseded", zap.String("csr", name), zap.String("node", decision.GetNode()), zap.String("by", decision.GetSupersededBy()))
	case result.Condition == certificatesv1.CertificateApproved:
		metrics.CSRApprovalSeconds.Observe(now.Sub(current.CreationTimestamp.Time).Seconds())
		logger.Info("csr approved", zap.String("csr", name), zap.String("node", decision.GetNode()),
			zap.String("reason", decision.GetReason()),
			zap.Duration("since_submitted", now.Sub(current.CreationTimestamp.Time)),
			zap.Duration("since_decided", now.Sub(decision.GetDecidedAt().AsTime())))
	default:
		logger.Warn("csr denied", zap.String("csr", name), zap.String("node", decision.GetNode()), zap.String("reason", decision.GetReason()))
	}

	return applied(string(result.Condition)), nil
}

// post records the outcome as Events: on the request always, and on the Node for a denial, so that
// `kubectl describe node` shows the attempt. A request denied because a newer one of the same requester
// superseded it is routine (a kubelet retries while its node joins) and gets a Normal Event on the request
// only, within the event budget: a kubelet that files requests in a loop costs no Event request per request.
func (s *csrSink) post(request *certificatesv1.CertificateSigningRequest, decision *specs.CSRDecisionSpec, cond certificatesv1.RequestConditionType) {
	if s.events == nil {
		return
	}

	nodeName := decision.GetNode()

	switch {
	case cond == certificatesv1.CertificateApproved:
		s.events.Eventf(request, corev1.EventTypeNormal, CSRApprovedReason, "approved by talos-ccm for node %s", nodeName)

		return
	case decision.GetSupersededBy() != "":
		s.events.Eventf(request, corev1.EventTypeNormal, CSRSupersededReason, "denied by talos-ccm: superseded by %s", decision.GetSupersededBy())

		return
	}

	message := truncate("denied by talos-ccm: "+decision.GetReason(), maxConditionMessage)
	s.events.Event(request, corev1.EventTypeWarning, CSRDeniedReason, message)

	if nodeName == "" {
		return
	}

	var node runtime.Object = &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: nodeName}

	if current, err := s.nodes.Get(nodeName); err == nil {
		node = current
	}

	s.events.Event(node, corev1.EventTypeWarning, CSRDeniedReason, truncate("certificate request "+request.Name+" "+message, maxConditionMessage))
}

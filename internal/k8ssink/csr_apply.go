package k8ssink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// Reasons of the conditions and Events talos-ccm writes on certificate requests.
const (
	CSRApprovedReason = "TalosCCMApproved"
	CSRDeniedReason   = "TalosCCMDenied"
	// CSRSupersededReason is the reason of the Event on a request denied because a newer request of the
	// same requester superseded it; its Denied condition has the reason CSRDeniedReason.
	CSRSupersededReason = "TalosCCMSuperseded"
)

// maxConditionMessage bounds the message of a condition: a denied request may list many names.
const maxConditionMessage = 4096

// CSRClient is the part of the CertificateSigningRequest client the applier uses;
// clientset.CertificatesV1().CertificateSigningRequests() implements it.
type CSRClient interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*certificatesv1.CertificateSigningRequest, error)
	UpdateApproval(
		ctx context.Context, name string, csr *certificatesv1.CertificateSigningRequest, opts metav1.UpdateOptions,
	) (*certificatesv1.CertificateSigningRequest, error)
}

// CSRApplier approves or denies certificate requests through the approval subresource. It keeps no state
// between calls: it is safe for concurrent use, for different requests.
type CSRApplier struct {
	client CSRClient
}

// NewCSRApplier returns an applier writing through client
// (clientset.CertificatesV1().CertificateSigningRequests()).
func NewCSRApplier(client CSRClient) *CSRApplier {
	return &CSRApplier{client: client}
}

// CSRApplyResult is what one Apply did.
type CSRApplyResult struct {
	// CSR is the request as returned by the write, or as last read.
	CSR *certificatesv1.CertificateSigningRequest
	// Condition is the condition written; empty when nothing was written.
	Condition certificatesv1.RequestConditionType
	// Skipped says why nothing was written, when nothing was.
	Skipped string
}

// Apply writes the verdict of decision on the request current (typically from an informer cache): the
// Approved or Denied condition, once. A request that is no longer pending, or is another request under
// the same name, is left alone. A conflict reads the request again and retries.
func (a *CSRApplier) Apply(ctx context.Context, current *certificatesv1.CertificateSigningRequest, decision *specs.CSRDecisionSpec, now time.Time) (CSRApplyResult, error) {
	cond, ok := DecisionCondition(decision, now)
	if !ok {
		return CSRApplyResult{CSR: current, Skipped: "the verdict is " + decision.GetVerdict()}, nil
	}

	csr := current
	res := CSRApplyResult{CSR: current}

	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if skipped := applicable(csr, decision); skipped != "" {
			res.Skipped = skipped

			return nil
		}

		update := csr.DeepCopy()
		update.Status.Conditions = append(update.Status.Conditions, cond)

		written, err := a.client.UpdateApproval(ctx, csr.Name, update, metav1.UpdateOptions{FieldManager: DefaultFieldManager})
		if apierrors.IsConflict(err) {
			fresh, getErr := a.client.Get(ctx, csr.Name, metav1.GetOptions{})
			if getErr != nil {
				return fmt.Errorf("failed to read certificate request %q: %w", csr.Name, getErr)
			}

			csr = fresh
		}

		if err != nil {
			return err
		}

		res.CSR = written
		res.Condition = cond.Type

		return nil
	})
	if err != nil {
		return res, fmt.Errorf("failed to update approval of certificate request %q: %w", current.Name, err)
	}

	return res, nil
}

// applicable says why a decision cannot be applied to a request, or "" when it can.
func applicable(csr *certificatesv1.CertificateSigningRequest, decision *specs.CSRDecisionSpec) string {
	switch {
	case decision.GetCsrUid() != "" && types.UID(decision.GetCsrUid()) != csr.UID:
		return "the request was replaced by another one of the same name"
	case !CSRPending(csr):
		return "the request is no longer pending"
	}

	return ""
}

// CSRPending says whether a request has none of the Approved, Denied and Failed conditions.
func CSRPending(csr *certificatesv1.CertificateSigningRequest) bool {
	return !slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		return c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied || c.Type == certificatesv1.CertificateFailed
	})
}

// DecisionCondition is the condition that carries out a decision: Approved for approve, Denied (with the
// failed rules) for deny; none for wait.
func DecisionCondition(decision *specs.CSRDecisionSpec, now time.Time) (certificatesv1.CertificateSigningRequestCondition, bool) {
	cond := certificatesv1.CertificateSigningRequestCondition{
		Status:             corev1.ConditionTrue,
		LastUpdateTime:     metav1.NewTime(now),
		LastTransitionTime: metav1.NewTime(now),
	}

	switch decision.GetVerdict() {
	case csr.VerdictApprove:
		cond.Type = certificatesv1.CertificateApproved
		cond.Reason = CSRApprovedReason
		cond.Message = truncate("approved by talos-ccm: every name and address belongs to node "+decision.GetNode()+" ("+decision.GetReason()+")", maxConditionMessage)
	case csr.VerdictDeny:
		cond.Type = certificatesv1.CertificateDenied
		cond.Reason = CSRDeniedReason
		cond.Message = truncate("denied by talos-ccm: "+decision.GetReason(), maxConditionMessage)
	default:
		return cond, false
	}

	return cond, true
}

// truncate cuts s to at most limit bytes, on a rune boundary, marking the cut.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}

	return strings.ToValidUTF8(s[:limit-len("…")], "") + "…"
}

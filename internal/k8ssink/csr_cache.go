package k8ssink

import (
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// TrimCSR drops from a certificate request what talos-ccm never reads before the informer caches it: its
// managedFields (a few hundred bytes per request, thousands of requests on a large cluster), and, once the
// request is approved, denied or failed, everything but what says which request it is and that it is
// decided (stubDecidedCSR). The approval update leaves managedFields out, so the server keeps its own; a
// request that is no longer pending is neither mirrored nor written again (see applicable), so nothing
// reads what it lost. A pending request keeps all the rest: the approval rules decide from it.
// The strings every kubelet's request repeats are shared with the other requests (shareCSRStrings).
//
// It is an informer transform (cache.TransformFunc): it changes the object it is given, which the
// informer has just decoded and nobody else holds.
func TrimCSR(obj any) (any, error) {
	csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
	if !ok {
		return obj, nil
	}

	csr.ManagedFields = nil

	if !CSRPending(csr) {
		stubDecidedCSR(csr)

		return csr, nil
	}

	shareCSRStrings(csr)

	return csr, nil
}

// stubDecidedCSR leaves of a request that is approved, denied or failed what its readers read: its name,
// uid and resourceVersion (the cache, the sink's check that a decision is of this request), its creation
// time, its signer (the KubeCSR mirror's filter) and the type and status of the first condition that
// decided it (the mirror's and the sink's test of pending), shared with every other such request. The
// signer's cleaner deletes an approved request only an hour after it was issued, and the kubelet makes two
// per Node (client and serving): a fleet joining left about 0.8 KB per Node of requests that nobody reads
// again, its PKCS#10 request and certificate, its requester, groups, usages and conditions' messages and
// times. The API server's own copy keeps everything.
func stubDecidedCSR(csr *certificatesv1.CertificateSigningRequest) {
	csr.ObjectMeta = metav1.ObjectMeta{
		Name: csr.Name, UID: csr.UID, ResourceVersion: csr.ResourceVersion,
		CreationTimestamp: csr.CreationTimestamp, DeletionTimestamp: csr.DeletionTimestamp,
	}
	csr.Spec = certificatesv1.CertificateSigningRequestSpec{SignerName: sharedstrings.Unique(csr.Spec.SignerName)}
	csr.Status = certificatesv1.CertificateSigningRequestStatus{Conditions: decidedConditions(csr.Status.Conditions)}
}

// decided holds one condition list per condition type that decides a request, with status True, as an
// approver writes it: the stub of every request so decided holds it instead of a list of its own.
var decided = map[certificatesv1.RequestConditionType][]certificatesv1.CertificateSigningRequestCondition{
	certificatesv1.CertificateApproved: {{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue}},
	certificatesv1.CertificateDenied:   {{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue}},
	certificatesv1.CertificateFailed:   {{Type: certificatesv1.CertificateFailed, Status: corev1.ConditionTrue}},
}

// decidedConditions returns a list of the type and status of the first condition of conds that decides a
// request: a shared one when its status is True.
func decidedConditions(conds []certificatesv1.CertificateSigningRequestCondition) []certificatesv1.CertificateSigningRequestCondition {
	for _, c := range conds {
		shared, ok := decided[c.Type]
		if !ok {
			continue
		}

		if c.Status == corev1.ConditionTrue {
			return shared
		}

		return []certificatesv1.CertificateSigningRequestCondition{{Type: shared[0].Type, Status: sharedstrings.Unique(c.Status)}}
	}

	return nil
}

package k8ssink

import (
	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// shareCSRStrings makes a decoded pending certificate request hold the one copy of the strings every
// kubelet's request repeats (its groups, signer, usages, its conditions' type, status and reason) instead
// of copies of its own: a fleet joining leaves one pending request per Node until it is decided (a decided
// one keeps only a stub: stubDecidedCSR). Its own strings (name, UID, username, messages) are left as they
// are.
func shareCSRStrings(csr *certificatesv1.CertificateSigningRequest) {
	csr.Spec.SignerName = sharedstrings.Unique(csr.Spec.SignerName)

	for i := range csr.Spec.Groups {
		csr.Spec.Groups[i] = sharedstrings.Unique(csr.Spec.Groups[i])
	}

	for i := range csr.Spec.Usages {
		csr.Spec.Usages[i] = sharedstrings.Unique(csr.Spec.Usages[i])
	}

	for i := range csr.Status.Conditions {
		c := &csr.Status.Conditions[i]
		c.Type, c.Status, c.Reason = sharedstrings.Unique(c.Type), sharedstrings.Unique(c.Status), sharedstrings.Unique(c.Reason)
	}
}

package kube

import (
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"
	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// CSRStatePending is the state of every mirrored request: finished ones are not mirrored.
const CSRStatePending = "Pending"

// PendingKubeletServingCSR says whether a CertificateSigningRequest is mirrored: a kubelet serving request
// (signer kubernetes.io/kubelet-serving) that is neither approved, denied nor failed.
func PendingKubeletServingCSR(csr *certificatesv1.CertificateSigningRequest) bool {
	if csr == nil || csr.Spec.SignerName != certificatesv1.KubeletServingSignerName {
		return false
	}

	return !slices.ContainsFunc(csr.Status.Conditions, func(c certificatesv1.CertificateSigningRequestCondition) bool {
		switch c.Type {
		case certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed:
			return true
		default:
			return false
		}
	})
}

// MirrorCSR extracts from a CertificateSigningRequest what the approval rules decide from. Of a request
// larger than csr.MaxRequestBytes it keeps the first csr.MaxRequestBytes+1 bytes, which rule 2 denies: the
// state keeps past versions of each mirror for its watchers, each with the bytes.
func MirrorCSR(csr *certificatesv1.CertificateSigningRequest) *specs.KubeCSRSpec {
	spec := &specs.KubeCSRSpec{
		Uid:        string(csr.UID),
		Username:   csr.Spec.Username,
		Groups:     slices.Clone(csr.Spec.Groups),
		Request:    slices.Clone(csr.Spec.Request[:min(len(csr.Spec.Request), csrres.MaxRequestBytes+1)]),
		SignerName: csr.Spec.SignerName,
		Created:    timestamppb.New(csr.CreationTimestamp.Time),
		State:      CSRStatePending,
	}

	for _, u := range csr.Spec.Usages {
		spec.Usages = append(spec.Usages, string(u))
	}

	if csr.Spec.ExpirationSeconds != nil {
		spec.ExpirationSeconds = int64(*csr.Spec.ExpirationSeconds)
	}

	return spec
}

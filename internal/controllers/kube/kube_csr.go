package kube

import (
	certificatesv1 "k8s.io/api/certificates/v1"

	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// KubeCSRController mirrors every pending kubelet serving CertificateSigningRequest into a KubeCSR, with
// MirrorCSR; a request that is approved, denied, failed or deleted leaves. It decides nothing.
type KubeCSRController = MirrorController[csrMirror, *certificatesv1.CertificateSigningRequest, *kube.KubeCSR]

type csrMirror struct{}

// Settings implements MirrorKind.
func (csrMirror) Settings() MirrorSettings[*certificatesv1.CertificateSigningRequest, *kube.KubeCSR] {
	return MirrorSettings[*certificatesv1.CertificateSigningRequest, *kube.KubeCSR]{
		Name:        "kube.KubeCSRController",
		Object:      "certificate request",
		NewResource: kube.NewKubeCSR,
		// Approved, denied, failed, or not a kubelet serving request: not mirrored.
		Mirrored: PendingKubeletServingCSR,
		Fill: func(csr *certificatesv1.CertificateSigningRequest, res *kube.KubeCSR) {
			res.TypedSpec().Value = MirrorCSR(csr)
			kube.LabelRequester(res)
		},
	}
}

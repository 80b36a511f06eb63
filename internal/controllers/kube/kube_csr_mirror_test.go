package kube_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

func TestPendingKubeletServingCSR(t *testing.T) {
	t.Parallel()

	withCondition := func(typ certificatesv1.RequestConditionType) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			Spec:   certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeletServingSignerName},
			Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{{Type: typ}}},
		}
	}

	for name, tc := range map[string]struct {
		csr  *certificatesv1.CertificateSigningRequest
		want bool
	}{
		"pending kubelet serving": {
			csr:  &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeletServingSignerName}},
			want: true,
		},
		"pending client": {
			csr: &certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName}},
		},
		"approved": {csr: withCondition(certificatesv1.CertificateApproved)},
		"denied":   {csr: withCondition(certificatesv1.CertificateDenied)},
		"failed":   {csr: withCondition(certificatesv1.CertificateFailed)},
		"nil":      {},
	} {
		assert.Equal(t, tc.want, kube.PendingKubeletServingCSR(tc.csr), name)
	}
}

func TestMirrorCSR(t *testing.T) {
	t.Parallel()

	created := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	expiration := int32(86400)

	spec := kube.MirrorCSR(&certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", UID: "u1", CreationTimestamp: metav1.NewTime(created)},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:           []byte("-----BEGIN CERTIFICATE REQUEST-----"),
			SignerName:        certificatesv1.KubeletServingSignerName,
			ExpirationSeconds: &expiration,
			Usages:            []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			Username:          "system:node:w1",
			Groups:            []string{"system:nodes", "system:authenticated"},
		},
	})

	assert.Equal(t, "u1", spec.GetUid())
	assert.Equal(t, "system:node:w1", spec.GetUsername())
	assert.Equal(t, []string{"system:nodes", "system:authenticated"}, spec.GetGroups())
	assert.Equal(t, []string{"digital signature", "server auth"}, spec.GetUsages())
	assert.Equal(t, int64(86400), spec.GetExpirationSeconds())
	assert.Equal(t, created, spec.GetCreated().AsTime())
	assert.Equal(t, kube.CSRStatePending, spec.GetState())
	assert.Equal(t, "-----BEGIN CERTIFICATE REQUEST-----", string(spec.GetRequest()))
}

// A request larger than any that can be approved is mirrored with just enough of its bytes to be denied.
func TestMirrorCSRCapsTheRequest(t *testing.T) {
	t.Parallel()

	large := make([]byte, 10*csrres.MaxRequestBytes)
	spec := kube.MirrorCSR(&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{Request: large}})
	assert.Len(t, spec.GetRequest(), csrres.MaxRequestBytes+1)

	small := []byte("-----BEGIN CERTIFICATE REQUEST-----")
	spec = kube.MirrorCSR(&certificatesv1.CertificateSigningRequest{Spec: certificatesv1.CertificateSigningRequestSpec{Request: small}})
	assert.Equal(t, small, spec.GetRequest())
}

package k8ssink_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// Two kubelets' requests, decoded each with strings of its own, hold one copy of what they repeat once
// cached, and their values are unchanged.
func TestTrimCSRSharesRepeatedStrings(t *testing.T) {
	t.Parallel()

	// decoded is a request as the decoder leaves it: every string a copy of its own.
	decoded := func(node string) *certificatesv1.CertificateSigningRequest {
		return &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "csr-" + node},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Username:   "system:node:" + node,
				Groups:     []string{strings.Clone("system:nodes"), strings.Clone("system:authenticated")},
				SignerName: strings.Clone(certificatesv1.KubeletServingSignerName),
				Usages: []certificatesv1.KeyUsage{
					certificatesv1.KeyUsage(strings.Clone(string(certificatesv1.UsageDigitalSignature))),
					certificatesv1.KeyUsage(strings.Clone(string(certificatesv1.UsageServerAuth))),
				},
			},
			// A condition that does not decide it: the request is pending, and keeps its values.
			Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{{
				Type: certificatesv1.RequestConditionType(strings.Clone("Checked")), Status: corev1.ConditionStatus(strings.Clone("True")), Reason: strings.Clone("Looked"),
			}}},
		}
	}

	trim := func(csr *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
		out, err := k8ssink.TrimCSR(csr)
		require.NoError(t, err)

		return out.(*certificatesv1.CertificateSigningRequest) //nolint:forcetypeassert
	}

	a, b := trim(decoded("w1")), trim(decoded("w2"))

	want := decoded("w1")
	assert.Equal(t, want, a, "the values are the request's")

	same := func(x, y string, what string) {
		assert.True(t, sharedstrings.SameCopy(x, y), "one copy of the %s", what)
	}

	same(a.Spec.SignerName, b.Spec.SignerName, "signer")
	same(a.Spec.Groups[1], b.Spec.Groups[1], "group")
	same(string(a.Spec.Usages[0]), string(b.Spec.Usages[0]), "usage")
	same(a.Status.Conditions[0].Reason, b.Status.Conditions[0].Reason, "condition's reason")
	assert.NotEqual(t, a.Spec.Username, b.Spec.Username)
}

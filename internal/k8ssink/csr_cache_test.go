package k8ssink_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
)

func TestTrimCSR(t *testing.T) {
	t.Parallel()

	csr := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Username: "system:node:w1", Request: []byte("pem")},
	}

	out, err := k8ssink.TrimCSR(csr)
	require.NoError(t, err)

	trimmed, ok := out.(*certificatesv1.CertificateSigningRequest)
	require.True(t, ok)
	assert.Nil(t, trimmed.ManagedFields)
	assert.Equal(t, "system:node:w1", trimmed.Spec.Username, "what decisions read stays")
	assert.Equal(t, []byte("pem"), trimmed.Spec.Request)

	for _, cond := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		decided := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "csr-2", UID: "u2"},
			Spec:       certificatesv1.CertificateSigningRequestSpec{Username: "system:node:w1", Request: []byte("pem")},
			Status: certificatesv1.CertificateSigningRequestStatus{
				Conditions:  []certificatesv1.CertificateSigningRequestCondition{{Type: cond, Status: "True"}},
				Certificate: []byte("issued"),
			},
		}

		out, err = k8ssink.TrimCSR(decided)
		require.NoError(t, err)

		trimmed = out.(*certificatesv1.CertificateSigningRequest) //nolint:forcetypeassert
		assert.Nil(t, trimmed.Spec.Request, "%s: a request no longer pending keeps no PKCS#10 request", cond)
		assert.Nil(t, trimmed.Status.Certificate, "%s: nor its certificate", cond)
		assert.Equal(t, "system:node:w1", trimmed.Spec.Username, cond)
		assert.Len(t, trimmed.Status.Conditions, 1, "%s: the conditions, which say it is decided, stay", cond)
	}

	other := &metav1.Status{}
	out, err = k8ssink.TrimCSR(other)
	require.NoError(t, err)
	assert.Same(t, other, out)
}

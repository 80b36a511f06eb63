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
		created := metav1.Unix(1000, 0)
		decided := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{
				Name: "csr-2", UID: "u2", ResourceVersion: "7", CreationTimestamp: created, GenerateName: "csr-",
				Labels: map[string]string{"a": "b"},
			},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Username: "system:node:w1", Groups: []string{"system:nodes"}, Request: []byte("pem"),
				SignerName: certificatesv1.KubeletServingSignerName, Usages: []certificatesv1.KeyUsage{certificatesv1.UsageServerAuth},
			},
			Status: certificatesv1.CertificateSigningRequestStatus{
				Conditions: []certificatesv1.CertificateSigningRequestCondition{
					{Type: "Other", Status: "True", Message: "not a decision"},
					{Type: cond, Status: "True", Reason: "AutoApproved", Message: "approved for w1", LastUpdateTime: created},
				},
				Certificate: []byte("issued"),
			},
		}

		out, err = k8ssink.TrimCSR(decided)
		require.NoError(t, err)

		trimmed = out.(*certificatesv1.CertificateSigningRequest) //nolint:forcetypeassert
		assert.Equal(t, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "csr-2", UID: "u2", ResourceVersion: "7", CreationTimestamp: created},
			Spec:       certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeletServingSignerName},
			Status: certificatesv1.CertificateSigningRequestStatus{
				Conditions: []certificatesv1.CertificateSigningRequestCondition{{Type: cond, Status: "True"}},
			},
		}, trimmed, "%s: a request no longer pending keeps what says which it is, its signer and that it is decided", cond)
		assert.False(t, k8ssink.CSRPending(trimmed), cond)
	}

	// A Failed condition of status False still says the request is decided.
	out, err = k8ssink.TrimCSR(&certificatesv1.CertificateSigningRequest{Status: certificatesv1.CertificateSigningRequestStatus{
		Conditions: []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateFailed, Status: "False", Message: "m"}},
	}})
	require.NoError(t, err)
	assert.Equal(t, []certificatesv1.CertificateSigningRequestCondition{{Type: certificatesv1.CertificateFailed, Status: "False"}},
		out.(*certificatesv1.CertificateSigningRequest).Status.Conditions) //nolint:forcetypeassert

	other := &metav1.Status{}
	out, err = k8ssink.TrimCSR(other)
	require.NoError(t, err)
	assert.Same(t, other, out)
}

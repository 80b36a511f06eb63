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

	other := &metav1.Status{}
	out, err = k8ssink.TrimCSR(other)
	require.NoError(t, err)
	assert.Same(t, other, out)
}

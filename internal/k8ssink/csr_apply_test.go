package k8ssink_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
)

func TestDecisionCondition(t *testing.T) {
	t.Parallel()

	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

	cond, ok := k8ssink.DecisionCondition(&specs.CSRDecisionSpec{Verdict: "approve", Node: "w1", Reason: "every rule passes"}, at)
	require.True(t, ok)
	assert.Equal(t, certificatesv1.CertificateApproved, cond.Type)
	assert.Equal(t, corev1.ConditionTrue, cond.Status)
	assert.Equal(t, k8ssink.CSRApprovedReason, cond.Reason)
	assert.Equal(t, "approved by talos-ccm: every name and address belongs to node w1 (every rule passes)", cond.Message)
	assert.Equal(t, at, cond.LastUpdateTime.Time)

	cond, ok = k8ssink.DecisionCondition(&specs.CSRDecisionSpec{Verdict: "deny", Reason: "rule 4 (usages): " + strings.Repeat("x", 10000)}, at)
	require.True(t, ok)
	assert.Equal(t, certificatesv1.CertificateDenied, cond.Type)
	assert.Equal(t, k8ssink.CSRDeniedReason, cond.Reason)
	assert.True(t, strings.HasPrefix(cond.Message, "denied by talos-ccm: rule 4 (usages): xxx"))
	assert.LessOrEqual(t, len(cond.Message), 4096, "long messages are cut")

	_, ok = k8ssink.DecisionCondition(&specs.CSRDecisionSpec{Verdict: "wait"}, at)
	assert.False(t, ok, "waiting writes nothing")

	_, ok = k8ssink.DecisionCondition(&specs.CSRDecisionSpec{}, at)
	assert.False(t, ok)
}

func TestCSRPending(t *testing.T) {
	t.Parallel()

	csr := &certificatesv1.CertificateSigningRequest{}
	assert.True(t, k8ssink.CSRPending(csr))

	for _, typ := range []certificatesv1.RequestConditionType{certificatesv1.CertificateApproved, certificatesv1.CertificateDenied, certificatesv1.CertificateFailed} {
		csr.Status.Conditions = []certificatesv1.CertificateSigningRequestCondition{{Type: typ, Status: corev1.ConditionTrue}}
		assert.False(t, k8ssink.CSRPending(csr), typ)
	}
}

// createServingCSR creates a kubelet serving request as the test's admin user.
func createServingCSR(t *testing.T, clientset kubernetes.Interface, name string) *certificatesv1.CertificateSigningRequest {
	t.Helper()

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		DNSNames: []string{name},
	}, key)
	require.NoError(t, err)

	csr, err := clientset.CertificatesV1().CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}),
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		_ = clientset.CertificatesV1().CertificateSigningRequests().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	return csr
}

func TestCSRApplierEnvtest(t *testing.T) {
	t.Parallel()

	env := sharedEnv(t)
	clientset := env.Clientset()
	requests := clientset.CertificatesV1().CertificateSigningRequests()
	applier := k8ssink.NewCSRApplier(requests)
	now := time.Now()

	t.Run("approve, then a stale copy changes nothing", func(t *testing.T) {
		t.Parallel()

		stale := createServingCSR(t, clientset, "csr-apply-approve")
		decision := &specs.CSRDecisionSpec{Verdict: "approve", Node: "csr-apply-approve", CsrUid: string(stale.UID), Reason: "every rule passes"}

		res, err := applier.Apply(t.Context(), stale, decision, now)
		require.NoError(t, err)
		assert.Equal(t, certificatesv1.CertificateApproved, res.Condition)

		got, err := requests.Get(t.Context(), stale.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, got.Status.Conditions, 1)
		assert.Equal(t, k8ssink.CSRApprovedReason, got.Status.Conditions[0].Reason)
		assert.Contains(t, got.Status.Conditions[0].Message, "talos-ccm")

		// An informer cache that lags behind: the conflict reads the request again, which is done.
		res, err = applier.Apply(t.Context(), stale, &specs.CSRDecisionSpec{Verdict: "deny", CsrUid: string(stale.UID)}, now)
		require.NoError(t, err)
		assert.Empty(t, res.Condition)
		assert.Equal(t, "the request is no longer pending", res.Skipped)

		got, err = requests.Get(t.Context(), stale.Name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Len(t, got.Status.Conditions, 1, "approved once, never denied after")
	})

	t.Run("deny", func(t *testing.T) {
		t.Parallel()

		csr := createServingCSR(t, clientset, "csr-apply-deny")

		res, err := applier.Apply(t.Context(), csr, &specs.CSRDecisionSpec{Verdict: "deny", CsrUid: string(csr.UID), Reason: "rule 7 (node-addresses): wildcard"}, now)
		require.NoError(t, err)
		assert.Equal(t, certificatesv1.CertificateDenied, res.Condition)

		got, err := requests.Get(t.Context(), csr.Name, metav1.GetOptions{})
		require.NoError(t, err)
		require.Len(t, got.Status.Conditions, 1)
		assert.Equal(t, certificatesv1.CertificateDenied, got.Status.Conditions[0].Type)
		assert.Equal(t, "denied by talos-ccm: rule 7 (node-addresses): wildcard", got.Status.Conditions[0].Message)
	})

	t.Run("another request of the same name", func(t *testing.T) {
		t.Parallel()

		csr := createServingCSR(t, clientset, "csr-apply-replaced")

		res, err := applier.Apply(t.Context(), csr, &specs.CSRDecisionSpec{Verdict: "approve", CsrUid: "not-this-one"}, now)
		require.NoError(t, err)
		assert.Empty(t, res.Condition)
		assert.Contains(t, res.Skipped, "replaced")
	})
}

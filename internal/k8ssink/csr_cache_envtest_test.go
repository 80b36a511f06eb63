package k8ssink_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// The certificate request informer, trimming with TrimCSR as talos-ccm runs it, caches a request approved
// before it listed, and one approved while it watches, as stubs that the applier leaves alone; a pending
// request keeps what the approval rules read. The API server keeps each request whole.
func TestTrimCSREnvtest(t *testing.T) {
	t.Parallel()

	env := sharedEnv(t)
	clientset := env.Clientset()
	requests := clientset.CertificatesV1().CertificateSigningRequests()
	applier := k8ssink.NewCSRApplier(requests)
	approve := func(csr *certificatesv1.CertificateSigningRequest) {
		res, err := applier.Apply(t.Context(), csr, &specs.CSRDecisionSpec{Verdict: "approve", Node: csr.Name, CsrUid: string(csr.UID)}, time.Now())
		require.NoError(t, err)
		require.Equal(t, certificatesv1.CertificateApproved, res.Condition)
	}

	approve(createServingCSR(t, clientset, "csr-trim-listed"))
	watched := createServingCSR(t, clientset, "csr-trim-watched")

	cfg := rest.CopyConfig(env.Config)
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON

	client, err := kubeclient.NewForConfig(cfg)
	require.NoError(t, err)

	informers := kubeclient.NewInformers(client)
	require.NoError(t, informers.CertificateSigningRequests().SetTransform(k8ssink.TrimCSR))

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); informers.Shutdown() })
	informers.Start(ctx)
	require.True(t, informers.WaitForCacheSync(t.Context()))

	cache := informers.CertificateSigningRequestLister()

	pending, err := cache.Get(watched.Name)
	require.NoError(t, err)
	assert.Equal(t, watched.Spec.Request, pending.Spec.Request, "a pending request keeps what the rules read")
	assert.Equal(t, watched.Spec.Username, pending.Spec.Username)
	assert.Equal(t, watched.Spec.Usages, pending.Spec.Usages)

	approve(watched)

	for _, name := range []string{"csr-trim-listed", "csr-trim-watched"} {
		var cached *certificatesv1.CertificateSigningRequest

		require.Eventually(t, func() bool {
			cached, err = cache.Get(name)

			return err == nil && !k8ssink.CSRPending(cached)
		}, 10*time.Second, 10*time.Millisecond, name)

		whole, err := requests.Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)
		require.NotEmpty(t, whole.Spec.Request, "%s: the API server keeps the request whole", name)
		require.NotEmpty(t, whole.Spec.Username, name)

		assert.Equal(t, &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, UID: whole.UID, ResourceVersion: whole.ResourceVersion, CreationTimestamp: whole.CreationTimestamp,
			},
			Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeletServingSignerName},
			Status: certificatesv1.CertificateSigningRequestStatus{Conditions: []certificatesv1.CertificateSigningRequestCondition{
				{Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue},
			}},
		}, cached, "%s: the cache keeps a stub", name)

		res, err := applier.Apply(t.Context(), cached, &specs.CSRDecisionSpec{Verdict: "deny", CsrUid: string(whole.UID)}, time.Now())
		require.NoError(t, err)
		assert.Equal(t, "the request is no longer pending", res.Skipped, name)
	}
}

package k8ssink_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	certlisters "k8s.io/client-go/listers/certificates/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

// A decision is applied once: newer versions of the same decision (the sink's own finalizer, a label) do not
// send the approval again while the informer's cache still shows the request pending.
func TestCSRSinkAppliesADecisionOnce(t *testing.T) {
	t.Parallel()

	request := &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", UID: "uid-1", ResourceVersion: "1"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Username: "system:node:w1", SignerName: certificatesv1.KubeletServingSignerName},
	}

	client := fake.NewClientset(request.DeepCopy())

	// The cache never catches up in this test: it shows the request pending throughout.
	requests := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, requests.Add(request))

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewCSRSinkController(
		k8ssink.NewCSRApplier(client.CertificatesV1().CertificateSigningRequests()),
		certlisters.NewCertificateSigningRequestLister(requests),
		corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		nil, 4,
	))

	ctx := s.Start()

	mirror := kube.NewKubeCSR(kube.NamespaceName, "csr-1")
	mirror.TypedSpec().Value = &specs.KubeCSRSpec{Username: "system:node:w1"}
	s.Create(mirror)

	decision := csr.NewCSRDecision(csr.NamespaceName, "csr-1")
	decision.TypedSpec().Value = &specs.CSRDecisionSpec{
		Verdict:      csr.VerdictApprove,
		Node:         "w1",
		CsrUid:       "uid-1",
		InputVersion: csr.InputVersion(mirror),
	}
	s.Create(decision)

	statusID := sink.ApplyStatusID(sink.KindCSR, "csr-1")

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal("CertificateSigningRequest/csr-1", as.TypedSpec().Value.GetObject())
		a.Equal([]string{string(certificatesv1.CertificateApproved)}, as.TypedSpec().Value.GetWrites())
	})

	// A newer version of the same decision.
	ctest.Modify(s, decision, func(d *csr.CSRDecision) error {
		d.Metadata().Labels().Set("example.com/touched", "yes")

		return nil
	})

	current, err := safe.StateGetByID[*csr.CSRDecision](ctx, s.State, "csr-1")
	require.NoError(t, err)

	ctest.AssertResource(s, statusID, func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal(current.Metadata().Version().String(), as.TypedSpec().Value.GetAppliedVersion())
	})

	updates := 0

	for _, action := range client.Actions() {
		if action.GetVerb() == "update" && action.GetSubresource() == "approval" {
			updates++
		}

		assert.NotEqual(t, "get", action.GetVerb(), "nothing is read again")
	}

	assert.Equal(t, 1, updates, "the approval is sent once")

	got, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, "csr-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, slicesContainsApproved(got))
}

func slicesContainsApproved(request *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range request.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved {
			return true
		}
	}

	return false
}

// The sink runs when a decision changes, not when the request's mirror does: the mirror is read, and a
// change of it comes back as a new decision.
func TestCSRSinkRunsOnDecisions(t *testing.T) {
	t.Parallel()

	ctrl := k8ssink.NewCSRSinkController(nil, nil, nil, nil, 1)

	kinds := map[string]controller.InputKind{}
	for _, in := range ctrl.Settings().Inputs {
		kinds[in.Type] = in.Kind
	}

	assert.Equal(t, map[string]controller.InputKind{
		csr.CSRDecisionType:  controller.InputQPrimary,
		kube.KubeCSRType:     controller.InputQMappedDestroyReady,
		sink.ApplyStatusType: controller.InputQMappedDestroyReady,
	}, kinds)
}

package k8ssink_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
// send the approval again while the informer's cache still shows the request pending. The request shows
// the approval: no ApplyStatus repeats it.
func TestCSRSinkAppliesADecisionOnce(t *testing.T) {
	t.Parallel()

	// The cache never catches up in this test: it shows the request pending throughout.
	s, client, _ := startCSRSink(t)
	ctx := s.Ctx()

	decision := decideCSR(s, "csr-1", "uid-1")
	passedCSRs(s, "missing-1")

	// A newer version of the same decision.
	ctest.Modify(s, decision, func(d *csr.CSRDecision) error {
		d.Metadata().Labels().Set("example.com/touched", "yes")

		return nil
	})

	passedCSRs(s, "missing-2")

	ctest.AssertNoResource[*sink.ApplyStatus](s, sink.ApplyStatusID(sink.KindCSR, "csr-1"))

	for _, action := range client.Actions() {
		assert.NotEqual(t, "get", action.GetVerb(), "nothing is read again")
	}

	assert.Equal(t, 1, approvals(client), "the approval is sent once")

	got, err := client.CertificatesV1().CertificateSigningRequests().Get(ctx, "csr-1", metav1.GetOptions{})
	require.NoError(t, err)
	assert.True(t, slicesContainsApproved(got))
}

// pendingCSR is the pending request csr-1 of uid.
func pendingCSR(uid string) *certificatesv1.CertificateSigningRequest {
	return &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{Name: "csr-1", UID: types.UID(uid), ResourceVersion: "1"},
		Spec:       certificatesv1.CertificateSigningRequestSpec{Username: "system:node:w1", SignerName: certificatesv1.KubeletServingSignerName},
	}
}

// startCSRSink starts a CSR sink that runs one pass at a time, in the order the decisions change, over a
// client and a cache that hold the pending request csr-1 of uid-1.
func startCSRSink(t *testing.T) (*ctest.Suite, *fake.Clientset, cache.Indexer) {
	t.Helper()

	client := fake.NewClientset(pendingCSR("uid-1"))

	requests := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	require.NoError(t, requests.Add(pendingCSR("uid-1")))

	s := ctest.New(t, ctest.WithoutLeakCheck())
	s.Register(k8ssink.NewCSRSinkController(
		k8ssink.NewCSRApplier(client.CertificatesV1().CertificateSigningRequests()),
		certlisters.NewCertificateSigningRequestLister(requests),
		corelisters.NewNodeLister(cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})),
		nil, 1,
	))
	s.Start()

	return s, client, requests
}

// decideCSR approves the request name of uid, as mirrored now.
func decideCSR(s *ctest.Suite, name, uid string) *csr.CSRDecision {
	mirror := kube.NewKubeCSR(kube.NamespaceName, name)
	mirror.TypedSpec().Value = &specs.KubeCSRSpec{Username: "system:node:w1", Uid: uid}
	s.Create(mirror)

	decision := csr.NewCSRDecision(csr.NamespaceName, name)
	decision.TypedSpec().Value = &specs.CSRDecisionSpec{Verdict: csr.VerdictApprove, Node: "w1", CsrUid: uid, InputVersion: csr.InputVersion(mirror)}
	s.Create(decision)

	return decision
}

// passedCSRs waits until a CSR sink that runs one pass at a time has run the passes queued so far: it
// decides the request marker, missing from the cache, whose pass runs after them and records the miss.
func passedCSRs(s *ctest.Suite, marker string) {
	decideCSR(s, marker, "uid-"+marker)

	ctest.AssertResource(s, sink.ApplyStatusID(sink.KindCSR, marker), func(as *sink.ApplyStatus, a *assert.Assertions) {
		a.Equal("CertificateSigningRequest not found", as.TypedSpec().Value.GetError())
	})
}

// approvals counts the approvals sent.
func approvals(client *fake.Clientset) int {
	n := 0

	for _, action := range client.Actions() {
		if action.GetVerb() == "update" && action.GetSubresource() == "approval" {
			n++
		}
	}

	return n
}

// A request replaced by another one of the same name is approved again: what the sink remembers it wrote
// is of the request it wrote it on.
func TestCSRSinkAppliesADecisionToAReplacedRequest(t *testing.T) {
	t.Parallel()

	s, client, requests := startCSRSink(t)
	ctx := s.Ctx()

	decision := decideCSR(s, "csr-1", "uid-1")
	passedCSRs(s, "missing-1")
	require.Equal(t, 1, approvals(client))

	// The request is replaced, and its decision follows the new one.
	require.NoError(t, client.CertificatesV1().CertificateSigningRequests().Delete(ctx, "csr-1", metav1.DeleteOptions{}))
	_, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, pendingCSR("uid-2"), metav1.CreateOptions{})
	require.NoError(t, err)
	require.NoError(t, requests.Update(pendingCSR("uid-2")))

	mirror := kube.NewKubeCSR(kube.NamespaceName, "csr-1")
	ctest.Modify(s, mirror, func(m *kube.KubeCSR) error {
		m.TypedSpec().Value.Uid = "uid-2"

		return nil
	})

	current, err := safe.StateGetByID[*kube.KubeCSR](ctx, s.State, "csr-1")
	require.NoError(t, err)

	ctest.Modify(s, decision, func(d *csr.CSRDecision) error {
		d.TypedSpec().Value.CsrUid = "uid-2"
		d.TypedSpec().Value.InputVersion = csr.InputVersion(current)

		return nil
	})

	passedCSRs(s, "missing-2")
	assert.Equal(t, 2, approvals(client), "the new request is approved")
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
	for _, in := range ctrl.Inputs() {
		kinds[in.Type] = in.Kind
	}

	assert.Equal(t, map[string]controller.InputKind{
		csr.CSRDecisionType:  controller.InputStrong,
		kube.KubeCSRType:     controller.InputDestroyReady,
		sink.ApplyStatusType: controller.InputDestroyReady,
	}, kinds)
}

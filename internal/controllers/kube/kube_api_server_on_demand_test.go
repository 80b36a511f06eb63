package kube_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
	kuberes "github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// The apiserver's endpoints are neither listed nor watched until a certificate request is mirrored; then they
// are, and mirrored as the shared informer's were.
func TestKubeAPIServerOnDemand(t *testing.T) {
	t.Parallel()

	client := fake.NewClientset(&discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: kube.APIServerNamespace, Name: kube.APIServerService},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.1"}}},
	})

	slices := client.DiscoveryV1().EndpointSlices(kube.APIServerNamespace)

	var made atomic.Int32

	ctrl := &kube.KubeAPIServerOnDemandController{NewInformer: func() *kubeclient.InlineInformer {
		made.Add(1)

		return kubeclient.NewInlineInformer(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
				return slices.List(ctx, opts)
			},
			WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
				return slices.Watch(ctx, opts)
			},
		}, client), &discoveryv1.EndpointSlice{}, nil)
	}}

	assert.Equal(t, (&kube.KubeAPIServerController{}).Name(), ctrl.Name(), "the mirrors' owner")

	s := ctest.New(t)
	s.Register(ctrl)
	s.Start()

	// A mirrored Node, say, starts nothing.
	s.Create(kuberes.NewKubeNode(kuberes.NamespaceName, "n1"))
	require.Never(t, func() bool { return made.Load() > 0 }, 300*time.Millisecond, 10*time.Millisecond, "no informer before a certificate request")
	ctest.AssertNoResource[*kuberes.KubeSync](s, kuberes.APIServerSyncID)

	s.Create(kuberes.NewKubeCSR(kuberes.NamespaceName, "csr-1"))

	ctest.AssertResource(s, kuberes.APIServerSyncID, func(res *kuberes.KubeSync, a *assert.Assertions) {
		a.True(res.TypedSpec().Value.GetSynced())
	})
	ctest.AssertResource(s, kuberes.KubeAPIServerID, func(res *kuberes.KubeAPIServer, a *assert.Assertions) {
		a.Equal([]string{"10.0.0.1"}, res.TypedSpec().Value.GetEndpointIps())
	})

	// More requests start nothing more.
	s.Create(kuberes.NewKubeCSR(kuberes.NamespaceName, "csr-2"))
	require.Never(t, func() bool { return made.Load() > 1 }, 300*time.Millisecond, 10*time.Millisecond)
	assert.EqualValues(t, 1, made.Load())
}

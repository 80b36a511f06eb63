package kube_test

import (
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource/rtestutils"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	kuberes "github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// A Node that talos-ccm wrote reaches the KubeNode mirror at once, before the Node watch brings it; what
// the watch brings later and is newer wins.
func TestNodeWrites(t *testing.T) {
	t.Parallel()

	registered := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "5"},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: kube.UninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
	}

	client := fake.NewClientset(registered.DeepCopy())
	factory := informers.NewSharedInformerFactory(client, 0)
	informer := factory.Core().V1().Nodes().Informer()

	writes := kube.NewNodeWrites(informer, nil)

	rt := ctest.New(t)
	rt.Register(t, &kube.KubeNodeController{Informer: informer, Writes: writes})

	ctx := rt.Start(t, 30*time.Second)

	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	require.True(t, cache.WaitForCacheSync(ctx.Done(), informer.HasSynced))

	rtestutils.AssertResource(ctx, t, rt.State, "n1", func(n *kuberes.KubeNode, a *assert.Assertions) {
		a.True(n.TypedSpec().Value.GetUninitialized())
	})

	// talos-ccm removes the taint; the apiserver's answer is given to NodeWrites, and the informer, whose
	// watch has not brought the change, still has the registered Node.
	initialized := registered.DeepCopy()
	initialized.ResourceVersion = "6"
	initialized.Spec.Taints = nil
	initialized.Spec.ProviderID = "talos://metal/10.0.0.1"

	writes.Written(initialized)

	rtestutils.AssertResource(ctx, t, rt.State, "n1", func(n *kuberes.KubeNode, a *assert.Assertions) {
		a.False(n.TypedSpec().Value.GetUninitialized())
		a.Equal("talos://metal/10.0.0.1", n.TypedSpec().Value.GetProviderId())
	})

	cached, ok, err := informer.GetStore().GetByKey("n1")
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "5", cached.(*corev1.Node).ResourceVersion, "the informer's cache is left as it is")

	// The watch brings a newer Node (another writer added a label): it wins over the older write.
	newer := initialized.DeepCopy()
	newer.ResourceVersion = "7"
	newer.Labels = map[string]string{"example.com/team": "storage"}

	_, err = client.CoreV1().Nodes().Update(ctx, newer, metav1.UpdateOptions{})
	require.NoError(t, err)

	rtestutils.AssertResource(ctx, t, rt.State, "n1", func(n *kuberes.KubeNode, a *assert.Assertions) {
		a.Equal("storage", n.TypedSpec().Value.GetLabels()["example.com/team"])
		a.False(n.TypedSpec().Value.GetUninitialized())
	})
}

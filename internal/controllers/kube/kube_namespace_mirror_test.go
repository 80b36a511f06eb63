package kube_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/controllers/kube"
	kuberes "github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// TestKubeNamespaceController: every Namespace is mirrored with its labels, a change of labels reaches the
// mirror, and a deleted Namespace loses it.
func TestKubeNamespaceController(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "a"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}},
	)
	factory := informers.NewSharedInformerFactory(client, 0)

	s := ctest.New(t)
	s.Register(&kube.KubeNamespaceController{Informer: factory.Core().V1().Namespaces().Informer()})
	ctx := s.Start()

	startFactory(t, client, "namespaces", factory)

	ctest.AssertResource(s, kuberes.NamespacesSyncID, func(res *kuberes.KubeSync, a *assert.Assertions) {
		a.True(res.TypedSpec().Value.GetSynced())
		a.EqualValues(2, res.TypedSpec().Value.GetObjects())
	})
	ctest.AssertResource(s, "team-a", func(res *kuberes.KubeNamespace, a *assert.Assertions) {
		a.Equal(map[string]string{"team": "a"}, res.TypedSpec().Value.GetLabels())
	})
	ctest.AssertResource(s, "plain", func(res *kuberes.KubeNamespace, a *assert.Assertions) {
		a.Empty(res.TypedSpec().Value.GetLabels())
	})

	_, err := client.CoreV1().Namespaces().Update(ctx,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"team": "b"}}}, metav1.UpdateOptions{})
	require.NoError(t, err)

	ctest.AssertResource(s, "team-a", func(res *kuberes.KubeNamespace, a *assert.Assertions) {
		a.Equal(map[string]string{"team": "b"}, res.TypedSpec().Value.GetLabels())
	})

	require.NoError(t, client.CoreV1().Namespaces().Delete(ctx, "plain", metav1.DeleteOptions{}))

	ctest.AssertNoResource[*kuberes.KubeNamespace](s, "plain")
}

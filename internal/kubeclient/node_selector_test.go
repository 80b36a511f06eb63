package kubeclient_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// TestNodeInformersNarrowedBySelector: the Nodes informer of NewNodeInformers lists and watches only the
// Nodes its label selector selects: those that exist when it starts, and those created after.
func TestNodeInformersNarrowedBySelector(t *testing.T) {
	t.Parallel()

	_, client := sharedClient(t)
	ctx := t.Context()

	create := func(name, cluster string) {
		t.Helper()

		_, err := client.Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{"kubeclient.test/cluster": cluster},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	create("kubeclient-sel-a1", "a")
	create("kubeclient-sel-b1", "b")

	informers := kubeclient.NewNodeInformers(client, "kubeclient.test/cluster=a")
	informers.Nodes()
	startInformers(t, informers)

	create("kubeclient-sel-a2", "a")
	create("kubeclient-sel-b2", "b")

	want := []string{"kubeclient-sel-a1", "kubeclient-sel-a2"}

	eventually(t, "the selected Nodes alone in the cache", func() error {
		nodes, err := informers.NodeLister().List(labels.Everything())
		if err != nil {
			return err
		}

		var got []string

		for _, n := range nodes {
			got = append(got, n.Name)
		}

		slices.Sort(got)

		if !slices.Equal(got, want) {
			return fmt.Errorf("cached Nodes %v, want %v", got, want)
		}

		return nil
	})
}

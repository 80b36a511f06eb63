package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestFloorNode checks that the floor's Nodes keep, once created, the status the simulated kubelets post:
// the apiserver takes a Node's status at its creation, so the floor writes to Nodes of the same size.
func TestFloorNode(t *testing.T) {
	t.Parallel()

	if testing.Short() {
		t.Skip("needs a control plane")
	}

	cs := testenv.Start(t).Clientset()

	for i, bare := range []bool{false, true} {
		node := floorNode(fmt.Sprintf("floor-%05d", i), bare)

		_, err := cs.CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
		require.NoError(t, err)

		stored, err := cs.CoreV1().Nodes().Get(t.Context(), node.Name, metav1.GetOptions{})
		require.NoError(t, err)

		assert.Equal(t, node.Status.Images, stored.Status.Images)
		assert.Len(t, stored.Status.Conditions, 4)
		assert.Equal(t, node.Status.NodeInfo, stored.Status.NodeInfo)

		if bare {
			assert.Empty(t, stored.Status.Images)
		} else {
			assert.Len(t, stored.Status.Images, talossim.NodeStatusImages)
			assert.Contains(t, stored.Status.Allocatable, corev1.ResourceName("hugepages-2Mi"))
		}
	}

	assert.Contains(t, nodeStatusText(false), "50 images")
	assert.Contains(t, nodeStatusText(true), "no images")
}

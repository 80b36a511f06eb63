package talossim_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// The kubelets of RunTestKubelets register their Nodes, and once the test is over the Nodes are gone: the next
// test on the same apiserver does not find them.
func TestRunTestKubelets(t *testing.T) {
	t.Parallel()

	if testing.Short() {
		t.Skip("needs a control plane")
	}

	env := testenv.Start(t)
	machines := testMachines()

	t.Run("test", func(t *testing.T) {
		kubelets := talossim.RunTestKubelets(t, env.Config, machines)

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()

		select {
		case <-kubelets.Registered():
		case <-ctx.Done():
			t.Fatal("timeout waiting for the nodes to register")
		}
	})

	for _, m := range machines {
		_, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), m.Name, metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "Node %s: %v", m.Name, err)
	}
}

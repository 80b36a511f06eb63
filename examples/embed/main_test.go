package main

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestExampleRuns runs the example against a local control plane with its facts.yaml: the Nodes it lists
// are initialized from the file.
func TestExampleRuns(t *testing.T) {
	t.Parallel()

	env := testenv.Start(t)
	kubeconfig := env.KubeconfigFile(t)

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	for name, ip := range map[string]string{"worker-1": "10.0.1.4", "worker-2": "10.0.1.5"} {
		_, err := env.Clientset().CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"alpha.kubernetes.io/provided-node-ip": ip}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
				Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule,
			}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() {
		done <- run(runCtx, clusterFlags{"demo": kubeconfig}, "facts.yaml", []string{"cloud-node"}, zaptest.NewLogger(t))
	}()

	want := map[string]string{"worker-1": "aws:///eu-west-1a/i-0123456789abcdef0", "worker-2": "talos://metal/10.0.1.5"}

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for name, providerID := range want {
			n, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if !assert.NoError(c, err) {
				continue
			}

			assert.Equal(c, providerID, n.Spec.ProviderID, name)
			for _, taint := range n.Spec.Taints {
				assert.NotEqual(c, "node.cloudprovider.kubernetes.io/uninitialized", taint.Key, name)
			}
			assert.Equal(c, "demo", n.Labels["node.cloudprovider.kubernetes.io/clustername"], name)
		}
	}, time.Minute, 200*time.Millisecond)

	stop()
	require.NoError(t, <-done)
}

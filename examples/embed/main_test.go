package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

const uninitializedKey = "node.cloudprovider.kubernetes.io/uninitialized"

// createNode registers a Node as a kubelet with --cloud-provider=external would.
func createNode(ctx context.Context, t *testing.T, env *testenv.Env, name, ip string) {
	t.Helper()

	_, err := env.Clientset().CoreV1().Nodes().Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"alpha.kubernetes.io/provided-node-ip": ip}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
			Key: uninitializedKey, Value: "true", Effect: corev1.TaintEffectNoSchedule,
		}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// initialized says what is not yet as wanted on an initialized Node.
func initialized(ctx context.Context, env *testenv.Env, name, providerID, clusterName, externalIP string) error {
	n, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err //nolint:wrapcheck
	}

	for _, taint := range n.Spec.Taints {
		if taint.Key == uninitializedKey {
			return errors.New("still uninitialized")
		}
	}

	if n.Spec.ProviderID != providerID {
		return fmt.Errorf("providerID %q, want %q", n.Spec.ProviderID, providerID)
	}

	if got := n.Labels["node.cloudprovider.kubernetes.io/clustername"]; got != clusterName {
		return fmt.Errorf("cluster name label %q, want %q", got, clusterName)
	}

	if externalIP != "" {
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeExternalIP && a.Address == externalIP {
				return nil
			}
		}

		return fmt.Errorf("no ExternalIP %s in %v", externalIP, n.Status.Addresses)
	}

	return nil
}

// writeCluster writes a cluster file: the committed demo file with the given kubeconfig, and edits.
func writeCluster(t *testing.T, dir, name, kubeconfig string, edits ...string) {
	t.Helper()

	data, err := os.ReadFile("clusters/demo.yaml")
	require.NoError(t, err)

	text := strings.Replace(string(data), `kubeconfig: ""`, "kubeconfig: "+kubeconfig, 1)
	for i := 0; i+1 < len(edits); i += 2 {
		require.Contains(t, text, edits[i])
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}

	// Written whole, then renamed, so that the example never reads half a file.
	tmp := filepath.Join(dir, "."+name+".tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(text), 0o600))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, name+".yaml")))
}

// TestExampleServesAClustersDirectory runs the example over a clusters directory, with the committed demo
// file against one control plane: its Nodes are initialized from the file's facts (the ExternalIP marked
// public without a link name included). A second file adds a second cluster on a second control plane; a
// change of the demo file adds a machine and renames the cluster; removing the second file removes that
// cluster: a Node that joins it then stays uninitialized.
func TestExampleServesAClustersDirectory(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	demo, second := testenv.Start(t), testenv.Start(t)
	dir := t.TempDir()

	createNode(ctx, t, demo, "worker-1", "10.0.1.4")
	createNode(ctx, t, demo, "worker-2", "10.0.1.5")
	writeCluster(t, dir, "demo", demo.KubeconfigFile(t))

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)

	// The host's log, which the test reads too: the status log says when a cluster is removed.
	logs, observed := observer.New(zapcore.InfoLevel)
	logger := zap.New(zapcore.NewTee(zaptest.NewLogger(t).Core(), logs))

	go func() { done <- run(runCtx, dir, nil, logger) }()

	t.Cleanup(func() {
		stop()
		require.NoError(t, <-done)
	})

	eventually := func(what string, check func(ctx context.Context) error) {
		testenv.Eventually(t, time.Minute, 200*time.Millisecond, what, check)
	}

	eventually("demo's Nodes initialized", func(ctx context.Context) error {
		return errors.Join(
			initialized(ctx, demo, "worker-1", "aws:///eu-west-1a/i-0123456789abcdef0", "demo", "203.0.113.4"),
			initialized(ctx, demo, "worker-2", "talos://metal/10.0.1.5", "demo", ""),
		)
	})

	// A second cluster: a file of its own, on its own control plane.
	createNode(ctx, t, second, "worker-1", "10.0.1.4")
	writeCluster(t, dir, "second", second.KubeconfigFile(t), "clusterName: demo", "clusterName: second")

	eventually("the second cluster's Node initialized", func(ctx context.Context) error {
		return initialized(ctx, second, "worker-1", "aws:///eu-west-1a/i-0123456789abcdef0", "second", "203.0.113.4")
	})

	// The demo file changes: a third machine, and another cluster name.
	createNode(ctx, t, demo, "worker-3", "10.0.1.6")
	writeCluster(t, dir, "demo", demo.KubeconfigFile(t), "clusterName: demo", "clusterName: demo-2",
		"  - nodeName: worker-2", "  - nodeName: worker-3\n    platform: metal\n    nodeIPs: [10.0.1.6]\n  - nodeName: worker-2")

	eventually("demo's change applied", func(ctx context.Context) error {
		return errors.Join(
			initialized(ctx, demo, "worker-3", "talos://metal/10.0.1.6", "demo-2", ""),
			initialized(ctx, demo, "worker-1", "aws:///eu-west-1a/i-0123456789abcdef0", "demo-2", "203.0.113.4"),
		)
	})

	// The second file goes, and with it the second cluster.
	require.NoError(t, os.Remove(filepath.Join(dir, "second.yaml")))

	// The removal is over once the cluster's status is gone, as the host's status log says; then nothing
	// serves the cluster any more: a Node that joins it stays uninitialized.
	eventually("the second cluster removed", func(context.Context) error {
		if observed.FilterMessage("cluster second").FilterField(zap.String("status", "removed")).Len() == 0 {
			return errors.New("not yet")
		}

		return nil
	})

	createNode(ctx, t, second, "worker-2", "10.0.1.5")

	testenv.Consistently(t, 3*rereadInterval, 200*time.Millisecond, "nothing serves the removed cluster", func(ctx context.Context) error {
		if initialized(ctx, second, "worker-2", "talos://metal/10.0.1.5", "second", "") == nil {
			return errors.New("the removed cluster's Node was initialized")
		}

		return nil
	})
}

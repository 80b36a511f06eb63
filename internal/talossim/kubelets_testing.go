package talossim

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// RunTestKubelets acts as the machines' kubelets (started with --cloud-provider=external) on the cluster of
// config until the test ends: it registers their Nodes and submits their serving certificate requests. Once
// the kubelets have stopped, it deletes the machines' Nodes, so that later tests on the same apiserver do not
// find them.
func RunTestKubelets(t testing.TB, config *rest.Config, machines []Machine) *Kubelets {
	t.Helper()

	kubelets, err := NewKubelets(config, machines, KubeletOptions{})
	if err != nil {
		t.Fatalf("failed to create kubelets: %v", err)
	}

	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatalf("failed to create clientset: %v", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})

	go func() {
		defer close(done)

		kubelets.Run(ctx) //nolint:errcheck // Run ends only with ctx.
	}()

	t.Cleanup(func() {
		cancel()
		<-done

		// The test's context has ended by now: the deletions get one of their own.
		for _, m := range machines {
			clientset.CoreV1().Nodes().Delete(context.Background(), m.Name, metav1.DeleteOptions{}) //nolint:errcheck // A Node already gone is fine.
		}
	})

	return kubelets
}

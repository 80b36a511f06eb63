package talossim

import (
	"context"
	"sync"
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

		deleteNodes(clientset, machines)
	})

	return kubelets
}

// deleteNodes deletes the machines' Nodes, a few at a time: a fleet of thousands is gone in seconds.
func deleteNodes(clientset kubernetes.Interface, machines []Machine) {
	names := make(chan string)

	var wg sync.WaitGroup

	for range 16 {
		wg.Go(func() {
			for name := range names {
				// The test's context has ended by now: the deletions get one of their own.
				clientset.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) //nolint:errcheck // A Node already gone is fine.
			}
		})
	}

	for _, m := range machines {
		names <- m.Name
	}

	close(names)
	wg.Wait()
}

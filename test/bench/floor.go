package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	applycorev1 "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const uninitializedTaint = "node.cloudprovider.kubernetes.io/uninitialized"

// measureFloor issues, on n Nodes of its own, the writes talos-ccm makes to initialize a Node (labels by
// server-side apply, status.addresses by a merge patch, providerID and taint removal by an update of the
// returned Node), with a bare client of the same concurrency and QPS. The Nodes are created before and
// deleted after, untimed.
func measureFloor(ctx context.Context, admin *rest.Config, n, concurrency, qps int) (latencies, error) {
	setup, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return latencies{}, err
	}

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("floor-%05d", i)
	}

	err = parallel(ctx, names, 64, func(ctx context.Context, name string) error {
		_, err := setup.CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: uninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		}, metav1.CreateOptions{})

		return err
	})
	if err != nil {
		return latencies{}, fmt.Errorf("failed to create floor nodes: %w", err)
	}

	cfg := rest.CopyConfig(admin)
	cfg.QPS, cfg.Burst = float32(qps), 2*qps

	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return latencies{}, err
	}

	var (
		mu   sync.Mutex
		done = make([]time.Duration, 0, n)
	)

	start := time.Now()

	err = parallel(ctx, names, concurrency, func(ctx context.Context, name string) error {
		if err := floorWrites(ctx, client, name); err != nil {
			return err
		}

		mu.Lock()
		done = append(done, time.Since(start))
		mu.Unlock()

		return nil
	})
	if err != nil {
		return latencies{}, fmt.Errorf("failed floor writes: %w", err)
	}

	// Every floor node waited from the start, as every talos-ccm node waits from talos-ccm's start.
	res := summarize(slices.Clone(done), done)

	err = parallel(ctx, names, 64, func(ctx context.Context, name string) error {
		return setup.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	})
	if err != nil {
		return latencies{}, fmt.Errorf("failed to delete floor nodes: %w", err)
	}

	return res, nil
}

func floorWrites(ctx context.Context, client kubernetes.Interface, name string) error {
	apply := applycorev1.Node(name).WithLabels(map[string]string{
		"topology.kubernetes.io/region":                "region-1",
		"topology.kubernetes.io/zone":                  "zone-1a",
		"node.kubernetes.io/instance-type":             "m5.large",
		"node.cloudprovider.kubernetes.io/platform":    "aws",
		"node.cloudprovider.kubernetes.io/clustername": "bench",
	})

	if _, err := client.CoreV1().Nodes().Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "floor", Force: true}); err != nil {
		return err
	}

	patch, err := json.Marshal(map[string]any{"status": map[string]any{"addresses": []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
		{Type: corev1.NodeHostName, Address: name},
	}}})
	if err != nil {
		return err
	}

	node, err := client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return err
	}

	node.Spec.ProviderID = "aws:///zone-1a/i-" + name
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitializedTaint })

	_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})

	return err
}

// parallel runs fn for every name with at most workers at once, stopping at the first error.
func parallel(ctx context.Context, names []string, workers int, fn func(context.Context, string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	jobs := make(chan string)
	errs := make(chan error, workers)

	var wg sync.WaitGroup

	for range workers {
		wg.Go(func() {
			for name := range jobs {
				if err := fn(ctx, name); err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)

					cancel()

					return
				}
			}
		})
	}

feed:
	for _, name := range names {
		select {
		case jobs <- name:
		case <-ctx.Done():
			break feed
		}
	}

	close(jobs)
	wg.Wait()
	close(errs)

	if err := <-errs; err != nil {
		return err
	}

	return ctx.Err()
}

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

// floorSpec is how the floor writes: which writes per Node, how many Nodes at once, and the client's rate
// limit.
type floorSpec struct {
	// writes is the write set per Node: 2 or 3 (floorWriteSets).
	writes      int
	concurrency int
	// qps and burst are the client-side rate limit; qps 0 is none.
	qps   float64
	burst int
	// bareNodes gives the floor's Nodes a bare status instead of a kubelet's (nodeStatus).
	bareNodes bool
}

// floorWriteSets are the write sets the floor can issue per Node, by number of writes: what talos-ccm
// does to initialize a Node, before (3) and after (2) it merged its metadata writes into one.
var floorWriteSets = map[int]struct {
	write func(ctx context.Context, client kubernetes.Interface, name string) error
	about string
}{
	2: {floorTwoWrites, "a merge patch of status.addresses, then one merge patch of labels, providerID and the taint removal guarded by resourceVersion"},
	3: {floorThreeWrites, "a server-side apply of labels, a merge patch of status.addresses, an update of providerID and taints"},
}

// measureFloor issues, on n Nodes of its own, the writes talos-ccm makes to initialize a Node, with a bare
// client of the spec's concurrency and rate limit. The Nodes are created before (with the status the
// simulated kubelets post, which a Node's creation may carry) and deleted after, untimed.
func measureFloor(ctx context.Context, admin *rest.Config, n int, spec floorSpec) (latencies, error) {
	writeSet, ok := floorWriteSets[spec.writes]
	if !ok {
		return latencies{}, fmt.Errorf("no floor of %d writes per node", spec.writes)
	}

	setup, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return latencies{}, err
	}

	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("floor-%05d", i)
	}

	err = parallel(ctx, names, 64, func(ctx context.Context, name string) error {
		_, err := setup.CoreV1().Nodes().Create(ctx, floorNode(name, spec.bareNodes), metav1.CreateOptions{})

		return err
	})
	if err != nil {
		return latencies{}, fmt.Errorf("failed to create floor nodes: %w", err)
	}

	client, err := kubernetes.NewForConfig(rateLimited(admin, spec.qps, spec.burst))
	if err != nil {
		return latencies{}, err
	}

	var (
		mu   sync.Mutex
		done = make([]time.Duration, 0, n)
	)

	start := time.Now()

	err = parallel(ctx, names, spec.concurrency, func(ctx context.Context, name string) error {
		if err := writeSet.write(ctx, client, name); err != nil {
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

// floorNode is a Node of the floor as its kubelet registers it: uninitialized, with its status.
func floorNode(name string, bare bool) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: uninitializedTaint, Value: "true", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     nodeStatus(name, bare),
	}
}

// rateLimited is cfg with a client-side rate limit of qps and burst, or none when qps is 0 (a negative QPS
// and no rate limiter: client-go then limits nothing).
func rateLimited(cfg *rest.Config, qps float64, burst int) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.RateLimiter = nil

	if qps <= 0 {
		out.QPS, out.Burst = -1, 0

		return out
	}

	out.QPS, out.Burst = float32(qps), burst

	return out
}

// floorLabels are the labels the floor writes, as many as talos-ccm writes on a cloud machine.
var floorLabels = map[string]string{
	"topology.kubernetes.io/region":                "region-1",
	"topology.kubernetes.io/zone":                  "zone-1a",
	"node.kubernetes.io/instance-type":             "m5.large",
	"node.cloudprovider.kubernetes.io/platform":    "aws",
	"node.cloudprovider.kubernetes.io/clustername": "bench",
}

// floorTwoWrites writes the addresses, then the labels, providerID and the taint removal in one write
// guarded by the resourceVersion the first returned: the uninitialized taint goes last, as talos-ccm
// removes it only after the addresses are applied.
func floorTwoWrites(ctx context.Context, client kubernetes.Interface, name string) error {
	node, err := patchFloorAddresses(ctx, client, name)
	if err != nil {
		return err
	}

	var taints []corev1.Taint // nil: the merge patch removes the list

	for _, t := range node.Spec.Taints {
		if t.Key != uninitializedTaint {
			taints = append(taints, t)
		}
	}

	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": node.ResourceVersion, "labels": floorLabels},
		"spec":     map[string]any{"providerID": "aws:///zone-1a/i-" + name, "taints": taints},
	})
	if err != nil {
		return err
	}

	_, err = client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "floor"})

	return err
}

// floorThreeWrites writes the labels by server-side apply, the addresses, then providerID and the taint
// removal by an update of the Node the second write returned.
func floorThreeWrites(ctx context.Context, client kubernetes.Interface, name string) error {
	apply := applycorev1.Node(name).WithLabels(floorLabels)

	if _, err := client.CoreV1().Nodes().Apply(ctx, apply, metav1.ApplyOptions{FieldManager: "floor", Force: true}); err != nil {
		return err
	}

	node, err := patchFloorAddresses(ctx, client, name)
	if err != nil {
		return err
	}

	node.Spec.ProviderID = "aws:///zone-1a/i-" + name
	node.Spec.Taints = slices.DeleteFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitializedTaint })

	_, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{FieldManager: "floor"})

	return err
}

// patchFloorAddresses replaces status.addresses by a merge patch of the status subresource.
func patchFloorAddresses(ctx context.Context, client kubernetes.Interface, name string) (*corev1.Node, error) {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"addresses": []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.1"},
		{Type: corev1.NodeHostName, Address: name},
	}}})
	if err != nil {
		return nil, err
	}

	return client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "floor"}, "status")
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

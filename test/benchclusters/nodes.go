package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// clusterLabel is the label of every Node with its cluster's ID: the clusters' node selectors select on it.
const clusterLabel = "bench.tccm.dev/cluster"

// createConcurrency bounds the Nodes the bench creates at once.
const createConcurrency = 32

// benchNode is one machine of a cluster: its Node, as its kubelet registers it, and its facts, as the host
// knows them.
type benchNode struct {
	cluster string
	name    string
	ip      netip.Addr
}

// nodeIP is the address of the machine of global index i: 10.0.0.1 onward.
func nodeIP(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{10, byte((i + 1) >> 16), byte((i + 1) >> 8), byte(i + 1)})
}

// machine is the node's facts, in the host's shape.
func (n benchNode) machine() factsv1.Machine {
	return factsv1.Machine{
		NodeName:    n.name,
		Platform:    "metal",
		MachineType: factsv1.MachineTypeWorker,
		NodeIPs:     []string{n.ip.String()},
		Addresses:   []factsv1.Address{{Address: n.ip.String() + "/16", Link: "eth0"}},
	}
}

// node is the Node a kubelet with --cloud-provider=external, --node-ip (which Talos always passes) and
// --node-labels for its cluster registers: with a node IP given, a kubelet announces it in an annotation and
// posts it, with its hostname, as the Node's first addresses, which the cloud provider then replaces.
func (n benchNode) node() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        n.name,
			Labels:      map[string]string{clusterLabel: n.cluster, corev1.LabelHostname: n.name},
			Annotations: map[string]string{kubekeys.AnnotationProvidedNodeIP: n.ip.String()},
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: n.ip.String()},
				{Type: corev1.NodeHostName, Address: n.name},
			},
		},
	}
}

// adminClient is a clientset of the apiserver without a client-side rate limit, speaking protobuf.
func adminClient(cfg *rest.Config) (*kubernetes.Clientset, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0
	ccm.PreferProtobuf(cfg)

	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the bench's client: %w", err)
	}

	return client, nil
}

// createNodes creates the Nodes, createConcurrency at once.
func createNodes(ctx context.Context, client kubernetes.Interface, nodes []benchNode) error {
	work := make(chan benchNode)

	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)

	for range createConcurrency {
		wg.Go(func() {
			for n := range work {
				if _, err := client.CoreV1().Nodes().Create(ctx, n.node(), metav1.CreateOptions{}); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("failed to create Node %s: %w", n.name, err))
					mu.Unlock()
				}
			}
		})
	}

	for _, n := range nodes {
		select {
		case work <- n:
		case <-ctx.Done():
		}
	}

	close(work)
	wg.Wait()

	return errors.Join(append(errs, ctx.Err())...)
}

// initWatch records when every Node of the apiservers was first seen initialized (without the
// uninitialized taint), from watch events.
type initWatch struct {
	// stop ends the watches: an apiserver with a watch open stops slowly.
	stop func()

	mu          sync.Mutex
	initialized map[string]time.Time
}

// startInitWatch watches the Nodes of every apiserver until stop or ctx ends.
func startInitWatch(ctx context.Context, clients []*kubernetes.Clientset) (*initWatch, error) {
	ctx, cancel := context.WithCancel(ctx)

	var factories []informers.SharedInformerFactory

	w := &initWatch{initialized: map[string]time.Time{}, stop: func() {
		cancel()

		for _, factory := range factories {
			factory.Shutdown()
		}
	}}

	for _, client := range clients {
		factory := informers.NewSharedInformerFactory(client, 0)
		factories = append(factories, factory)
		informer := factory.Core().V1().Nodes().Informer()

		if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    w.observe,
			UpdateFunc: func(_, obj any) { w.observe(obj) },
		}); err != nil {
			w.stop()

			return nil, fmt.Errorf("failed to watch the Nodes: %w", err)
		}

		factory.Start(ctx.Done())

		if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
			w.stop()

			return nil, errors.New("the Node watch never synced")
		}
	}

	return w, nil
}

func (w *initWatch) observe(obj any) {
	node, ok := obj.(*corev1.Node)
	if !ok {
		return
	}

	for _, taint := range node.Spec.Taints {
		if taint.Key == kubekeys.TaintUninitialized {
			return
		}
	}

	now := time.Now()

	w.mu.Lock()
	defer w.mu.Unlock()

	if _, seen := w.initialized[node.Name]; !seen {
		w.initialized[node.Name] = now
	}
}

// at returns when the Node was first seen initialized.
func (w *initWatch) at(name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()

	at, ok := w.initialized[name]

	return at, ok
}

// first returns when the first of the Nodes was seen initialized.
func (w *initWatch) first(nodes []benchNode) (time.Time, bool) {
	var first time.Time

	for _, n := range nodes {
		if at, ok := w.at(n.name); ok && (first.IsZero() || at.Before(first)) {
			first = at
		}
	}

	return first, !first.IsZero()
}

// waitAll waits until every one of the Nodes was seen initialized, or timeout.
func (w *initWatch) waitAll(ctx context.Context, nodes []benchNode, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, string) {
		left := 0

		for _, n := range nodes {
			if _, ok := w.at(n.name); !ok {
				left++
			}
		}

		return left == 0, fmt.Sprintf("%d of %d Nodes not initialized", left, len(nodes))
	})
}

// waitFirst waits until one Node of each group was seen initialized, or timeout.
func (w *initWatch) waitFirst(ctx context.Context, groups [][]benchNode, timeout time.Duration) error {
	return poll(ctx, timeout, func() (bool, string) {
		left := 0

		for _, g := range groups {
			if _, ok := w.first(g); !ok {
				left++
			}
		}

		return left == 0, fmt.Sprintf("%d of %d clusters without an initialized Node", left, len(groups))
	})
}

// pollInterval is how often a wait checks its condition; the times measured come from the watch events.
const pollInterval = 50 * time.Millisecond

// poll checks done every pollInterval until it reports true, or fails with its last word after timeout.
func poll(ctx context.Context, timeout time.Duration, done func() (bool, string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()

	for {
		ok, why := done()
		if ok {
			return nil
		}

		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %s: %s", timeout, why)
		case <-ticker.C:
		}
	}
}

package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// watcher records, from the apiserver's own watch streams, when each Node lost its uninitialized taint,
// when each CSR was first seen, and when each CSR was approved.
type watcher struct {
	initialized map[string]time.Time
	seen        map[string]time.Time
	approved    map[string]time.Time
	factory     informers.SharedInformerFactory
	cancel      context.CancelFunc
	mu          sync.Mutex
}

func newWatcher(ctx context.Context, cfg *rest.Config) (*watcher, error) {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(ctx)
	w := &watcher{
		initialized: map[string]time.Time{},
		seen:        map[string]time.Time{},
		approved:    map[string]time.Time{},
		factory:     informers.NewSharedInformerFactory(client, 0),
		cancel:      cancel,
	}

	onNode := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitializedTaint }) {
			return
		}

		w.record(w.initialized, n.Name)
	}

	onCSR := func(obj any) {
		csr, ok := obj.(*certificatesv1.CertificateSigningRequest)
		if !ok {
			return
		}

		w.record(w.seen, csr.Name)

		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateApproved {
				w.record(w.approved, csr.Name)
			}
		}
	}

	if _, err = w.factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onNode, UpdateFunc: func(_, obj any) { onNode(obj) },
	}); err != nil {
		return nil, err
	}

	if _, err = w.factory.Certificates().V1().CertificateSigningRequests().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onCSR, UpdateFunc: func(_, obj any) { onCSR(obj) },
	}); err != nil {
		return nil, err
	}

	w.factory.Start(ctx.Done())
	w.factory.WaitForCacheSync(ctx.Done())

	return w, nil
}

func (w *watcher) record(m map[string]time.Time, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()

	if _, seen := m[name]; !seen {
		m[name] = time.Now()
	}
}

func (w *watcher) get(m map[string]time.Time, name string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()

	t, ok := m[name]

	return t, ok
}

func (w *watcher) stop() {
	w.cancel()
	w.factory.Shutdown()
}

// waitInitialized waits until every named Node is initialized.
func (w *watcher) waitInitialized(ctx context.Context, names []string, timeout time.Duration, exited <-chan struct{}, progress func(int)) error {
	deadline := time.Now().Add(timeout)

	for {
		done := 0

		for _, name := range names {
			if _, ok := w.get(w.initialized, name); ok {
				done++
			}
		}

		progress(done)

		if done == len(names) {
			return nil
		}

		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d nodes initialized within %s", done, len(names), timeout)
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-exited:
			return fmt.Errorf("talos-ccm exited with %d of %d nodes initialized (see its log)", done, len(names))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// nodeLatencies measures each node from its creation (or talos-ccm's start, if later: a node cannot be
// initialized before talos-ccm runs) to the removal of its uninitialized taint.
func nodeLatencies(names []string, w *watcher, kubelets *talossim.Kubelets, start time.Time) latencies {
	per := make([]time.Duration, 0, len(names))
	done := make([]time.Duration, 0, len(names))

	for _, name := range names {
		at, ok := w.get(w.initialized, name)
		if !ok {
			continue
		}

		from := start
		if t, ok := kubelets.Times(name); ok && t.Created.After(start) {
			from = t.Created
		}

		per = append(per, at.Sub(from))
		done = append(done, at.Sub(start))
	}

	return summarize(per, done)
}

// csrLatencies waits up to timeout until every node's kubelet has settled its serving certificate (its
// newest request approved for every name and IP of its Node, or denied; see talossim.NodeTimes), and
// measures each node's newest request from the later of its submission and its Node's initialization
// (talos-ccm approves nothing for a Node it has not initialized, and a kubelet asks as soon as it
// registers) to its approval, and from its submission to its first event on a watch of the apiserver's
// (what talos-ccm cannot be faster than). It returns how many requests the kubelets filed in all.
func (w *watcher) csrLatencies(ctx context.Context, kubelets *talossim.Kubelets, names []string, timeout time.Duration) (approval, watched latencies, submitted int) {
	deadline := time.Now().Add(timeout)

	for {
		submitted = 0
		settled := 0

		per := make([]time.Duration, 0, len(names))
		seen := make([]time.Duration, 0, len(names))

		for _, name := range names {
			t, ok := kubelets.Times(name)
			if !ok || t.CSRName == "" {
				continue
			}

			submitted += t.CSRs

			if !t.CSRSettled.IsZero() {
				settled++
			}

			if at, ok := w.get(w.seen, t.CSRName); ok {
				seen = append(seen, max(at.Sub(t.CSRSubmitted), 0))
			}

			if at, ok := w.get(w.approved, t.CSRName); ok {
				from := t.CSRSubmitted
				if initialized, ok := w.get(w.initialized, name); ok && initialized.After(from) {
					from = initialized
				}

				per = append(per, max(at.Sub(from), 0))
			}
		}

		if settled == len(names) || time.Now().After(deadline) || ctx.Err() != nil {
			return summarize(per, slices.Clone(per)), summarize(seen, seen), submitted
		}

		time.Sleep(100 * time.Millisecond)
	}
}

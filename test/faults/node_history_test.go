//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/talossim"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// maxRegressions bounds the regressions a history keeps: the first ones tell the story.
const maxRegressions = 50

// nodeHistory watches the Nodes of one name prefix during a whole test and remembers what a test cannot see
// from their final state: every providerID a Node ever had, and every write that undid something applied
// before. What talos-ccm applied is taken when the Node is first seen initialized (without the
// uninitialized taint); afterwards none of those labels, the providerID or the addresses may change or go,
// and the taint may not come back.
type nodeHistory struct {
	prefix string
	store  cache.Store

	mu            sync.Mutex
	providerIDs   map[string][]string
	applied       map[string]*corev1.Node
	initializedAt map[string]time.Time
	regressions   []string
}

// watchNodes starts a history of the Nodes named PREFIX-* on c; it waits for the watch to be established.
func watchNodes(t *testing.T, c cluster, prefix string) *nodeHistory {
	t.Helper()

	h := &nodeHistory{
		prefix:        prefix + "-",
		providerIDs:   map[string][]string{},
		applied:       map[string]*corev1.Node{},
		initializedAt: map[string]time.Time{},
	}

	factory := informers.NewSharedInformerFactory(c.clientset, 0)
	informer := factory.Core().V1().Nodes().Informer()
	h.store = informer.GetStore()

	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    h.observe,
		UpdateFunc: func(_, obj any) { h.observe(obj) },
	}); err != nil {
		t.Fatalf("failed to watch Nodes: %v", err)
	}

	stop := make(chan struct{})
	factory.Start(stop)

	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()
	})

	if !cache.WaitForCacheSync(t.Context().Done(), informer.HasSynced) {
		t.Fatal("the Node watch did not sync")
	}

	return h
}

func (h *nodeHistory) observe(obj any) {
	n, ok := obj.(*corev1.Node)
	if !ok || !strings.HasPrefix(n.Name, h.prefix) {
		return
	}

	h.mu.Lock()
	defer h.mu.Unlock()

	if id := n.Spec.ProviderID; id != "" {
		seen := h.providerIDs[n.Name]
		if len(seen) == 0 || seen[len(seen)-1] != id {
			h.providerIDs[n.Name] = append(seen, id)
		}
	}

	before, wasApplied := h.applied[n.Name]

	switch {
	case !wasApplied && isInitialized(n):
		h.applied[n.Name] = n.DeepCopy()
		h.initializedAt[n.Name] = time.Now()
	case wasApplied:
		for _, problem := range undone(before, n) {
			if len(h.regressions) < maxRegressions {
				h.regressions = append(h.regressions, n.Name+": "+problem)
			}
		}
	}
}

// undone lists what after no longer has of what before (an initialized Node) had.
func undone(before, after *corev1.Node) []string {
	var out []string

	if !isInitialized(after) {
		out = append(out, "the uninitialized taint came back")
	}

	if after.Spec.ProviderID != before.Spec.ProviderID {
		out = append(out, fmt.Sprintf("providerID %q became %q", before.Spec.ProviderID, after.Spec.ProviderID))
	}

	for _, key := range slices.Sorted(maps.Keys(before.Labels)) {
		if value, ok := after.Labels[key]; !ok || value != before.Labels[key] {
			out = append(out, fmt.Sprintf("label %s=%q became %q (present: %t)", key, before.Labels[key], value, ok))
		}
	}

	for _, a := range before.Status.Addresses {
		if !slices.Contains(after.Status.Addresses, a) {
			out = append(out, fmt.Sprintf("address %s %s went away", a.Type, a.Address))
		}
	}

	return out
}

// node returns the latest state of a Node, nil when it does not exist.
func (h *nodeHistory) node(name string) *corev1.Node {
	obj, ok, err := h.store.GetByKey(name)
	if err != nil || !ok {
		return nil
	}

	n, _ := obj.(*corev1.Node)

	return n
}

// countInitialized counts the named Nodes that are initialized now.
func (h *nodeHistory) countInitialized(names []string) int {
	n := 0

	for _, name := range names {
		if node := h.node(name); node != nil && isInitialized(node) {
			n++
		}
	}

	return n
}

// waitNodes waits until cond holds for every named Node, or fails the test after timeout.
func (h *nodeHistory) waitNodes(t *testing.T, names []string, timeout time.Duration, what string, cond func(*corev1.Node) bool) {
	t.Helper()

	waitEach(t, names, timeout, "Nodes "+what, func(name string) error {
		n := h.node(name)
		switch {
		case n == nil:
			return errNoNode
		case !cond(n):
			return errNotYet
		default:
			return nil
		}
	})
}

// waitInitializedCount waits until at least count of the named Nodes are initialized, or fails the test
// after timeout.
func (h *nodeHistory) waitInitializedCount(t *testing.T, names []string, count int, timeout time.Duration, what string) {
	t.Helper()

	testenv.Eventually(t, timeout, 100*time.Millisecond, what, func(context.Context) error {
		if n := h.countInitialized(names); n < count {
			return fmt.Errorf("%d of %d Nodes initialized, want %d", n, len(names), count)
		}

		return nil
	})
}

// errNoNode is what a wait for Nodes says of a Node that does not exist (yet).
var errNoNode = errors.New("no Node")

// checkNothingUndone fails the test for every write that undid something applied.
func (h *nodeHistory) checkNothingUndone(t *testing.T) {
	t.Helper()

	h.mu.Lock()
	defer h.mu.Unlock()

	for _, r := range h.regressions {
		t.Errorf("undone: %s", r)
	}
}

// checkProviderIDs fails the test for every Node whose providerID ever differed from what its machine's
// facts give in the end: a fallback written too early can never be corrected (providerID is immutable).
func (h *nodeHistory) checkProviderIDs(t *testing.T, machines []talossim.Machine) {
	t.Helper()

	h.mu.Lock()
	defer h.mu.Unlock()

	for _, m := range machines {
		want := expectedProviderID(m)
		seen := h.providerIDs[m.Name]

		switch {
		case len(seen) == 0:
			t.Errorf("%s: never had a providerID, want %s", m.Name, want)
		case len(seen) > 1 || seen[0] != want:
			t.Errorf("%s: providerIDs seen %q, want only %s", m.Name, seen, want)
		}
	}
}

func isInitialized(n *corev1.Node) bool {
	return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == kubekeys.TaintUninitialized })
}

func hasPodCIDR(n *corev1.Node) bool {
	return len(n.Spec.PodCIDRs) > 0
}

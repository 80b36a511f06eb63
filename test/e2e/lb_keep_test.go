package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// lbKeepConfig has a /28 pool and a /30 pool; lbKeepShrunk is the same with the /28 shrunk to a /29 that
// leaves out the Services' first IPs.
const (
	lbKeepConfig = `loadBalancer:
  pools:
    - name: keep-edge
      addresses: [10.30.0.0/28]
      namespaces: [lb-keep]
    - name: keep-small
      addresses: [198.51.100.100/30]
      namespaces: [lb-keep-small]
`
	lbKeepShrunk = `loadBalancer:
  pools:
    - name: keep-edge
      addresses: [10.30.0.8/29]
      namespaces: [lb-keep]
    - name: keep-small
      addresses: [198.51.100.100/30]
      namespaces: [lb-keep-small]
`
)

// startLoadBalancer runs talos-ccm's LoadBalancer IP controllers alone, with an empty state (kept in
// memory) and the config file at path, and returns a client of its state.
func startLoadBalancer(t *testing.T, path string) (*ccm, state.State) {
	t.Helper()

	socket := filepath.Join(socketDir(t), "ccm.sock")
	instance := startCCM(t, nil, app.Options{Controllers: []string{"service-lb"}, ConfigFile: path, APIListen: socket})

	return instance, stateClient(t, socket)
}

// waitAllocation waits until the IPAllocation with the ID satisfies check, which says what is wrong.
func waitAllocation(t *testing.T, st state.State, id, what string, check func(*specs.IPAllocationSpec) error) {
	t.Helper()

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, what, func(ctx context.Context) error {
		a := ipAllocations(ctx, st, id)[id]
		if a == nil {
			return errors.New("no allocation")
		}

		return check(a)
	})
}

// kept checks that an allocation holds the address with the warning (none when empty).
func kept(address, warning string) func(*specs.IPAllocationSpec) error {
	return func(a *specs.IPAllocationSpec) error {
		if a.GetState() != ipam.StateAllocated || a.GetAddress() != address || a.GetWarning() != warning {
			return fmt.Errorf("state %s, address %s, warning %q (%s)", a.GetState(), a.GetAddress(), a.GetWarning(), a.GetReason())
		}

		return nil
	}
}

// TestLoadBalancerSafeDefaultsAndKeep: a /30 pool never hands out its first and last address, while a
// Service that already shows one (given by an older talos-ccm) keeps it; a pool shrink leaves every Service
// its IP, which nobody else gets; a restart with the state lost renumbers nothing; the release annotation
// moves a Service into the pool.
func TestLoadBalancerSafeDefaultsAndKeep(t *testing.T) {
	for _, ns := range []string{"lb-keep", "lb-keep-small"} {
		_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	const ns = "lb-keep"

	id := func(name string) string { return ipam.ServiceAllocationID(ns+"/"+name, ipam.FamilyIPv4) }

	// A Service of today, given the network address of the pool by a talos-ccm that handed those out.
	createService(t, ns, "today", nil)

	today, err := env.Clientset().CoreV1().Services(ns).Get(t.Context(), "today", metav1.GetOptions{})
	require.NoError(t, err)

	today.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "10.30.0.0"}}
	_, err = env.Clientset().CoreV1().Services(ns).UpdateStatus(t.Context(), today, metav1.UpdateOptions{})
	require.NoError(t, err)

	mount := newConfigMapMount(t)
	mount.update(t, lbKeepConfig)

	first, st := startLoadBalancer(t, mount.path)

	// The /30: its two middle addresses, then nothing.
	createService(t, "lb-keep-small", "s1", nil)
	waitIngress(t, "lb-keep-small", "s1", "198.51.100.101")
	createService(t, "lb-keep-small", "s2", nil)
	waitIngress(t, "lb-keep-small", "s2", "198.51.100.102")
	createService(t, "lb-keep-small", "s3", nil)
	waitEvents(t, 30*time.Second, "lb-keep-small", "LoadBalancerIPUnavailable", "s3")
	assert.Empty(t, ingress(t, "lb-keep-small", "s3"))

	pool := ipPool(t.Context(), st, "lb/keep-small/ipv4")
	require.NotNil(t, pool)
	assert.Equal(t, uint64(2), pool.GetSize())
	assert.Equal(t, []string{"198.51.100.100/32", "198.51.100.103/32"}, pool.GetExcluded())

	// Today's Service keeps its address; new ones start at the first usable address.
	waitAllocation(t, st, id("today"), "today's Service keeps the network address", kept("10.30.0.0", ipam.WarningReservedAddress))
	createService(t, ns, "a", nil)
	waitIngress(t, ns, "a", "10.30.0.1")
	createService(t, ns, "b", nil)
	waitIngress(t, ns, "b", "10.30.0.2")
	assert.Equal(t, []string{"10.30.0.0"}, ingress(t, ns, "today"))

	// The shrink: every Service keeps its IP, with a warning.
	mount.update(t, lbKeepShrunk)

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, "the shrunk pool is in use", func(ctx context.Context) error {
		if got := ipPool(ctx, st, "lb/keep-edge/ipv4").GetRanges(); !slices.Equal(got, []string{"10.30.0.8/29"}) {
			return fmt.Errorf("ranges %v", got)
		}

		return nil
	})

	for name, ip := range map[string]string{"today": "10.30.0.0", "a": "10.30.0.1", "b": "10.30.0.2"} {
		waitAllocation(t, st, id(name), name+" keeps its IP outside the pool", kept(ip, ipam.WarningOutsidePools))
	}

	// Nobody else gets them: a request is refused, a new Service gets an address of the new range.
	createService(t, ns, "thief", func(s *corev1.Service) {
		s.Annotations = map[string]string{kubekeys.AnnotationLoadBalancerIPs: "10.30.0.1"}
	})
	waitEvents(t, 30*time.Second, ns, "LoadBalancerIPRejected", "thief")
	assert.Empty(t, ingress(t, ns, "thief"))

	createService(t, ns, "c", nil)
	waitIngress(t, ns, "c", "10.30.0.9")

	for name, ip := range map[string]string{"today": "10.30.0.0", "a": "10.30.0.1", "b": "10.30.0.2"} {
		assert.Equal(t, []string{ip}, ingress(t, ns, name), name)
	}

	// A restart with the state lost: the IPs are taken back from the Services' status, none renumbered.
	first.stop()

	_, st = startLoadBalancer(t, mount.path)

	for name, ip := range map[string]string{"today": "10.30.0.0", "a": "10.30.0.1", "b": "10.30.0.2"} {
		waitAllocation(t, st, id(name), name+" is taken back outside the pool", kept(ip, ipam.WarningOutsidePools))
	}

	waitAllocation(t, st, id("c"), "c is taken back", kept("10.30.0.9", ""))
	waitAllocation(t, st, ipam.ServiceAllocationID("lb-keep-small/s1", ipam.FamilyIPv4), "s1 is taken back", kept("198.51.100.101", ""))

	want := map[string]string{"today": "10.30.0.0", "a": "10.30.0.1", "b": "10.30.0.2", "c": "10.30.0.9"}

	testenv.Consistently(t, 3*time.Second, 200*time.Millisecond, "nothing is renumbered after the restart", func(context.Context) error {
		for name, ip := range want {
			if got := ingress(t, ns, name); !slices.Equal(got, []string{ip}) {
				return fmt.Errorf("%s: ingress %v, want %s", name, got, ip)
			}
		}

		return nil
	})

	// The operator releases one: it moves into the pool, the others stay.
	a, err := env.Clientset().CoreV1().Services(ns).Get(t.Context(), "a", metav1.GetOptions{})
	require.NoError(t, err)

	a.Annotations = map[string]string{kubekeys.AnnotationReleaseLoadBalancerIP: "true"}
	_, err = env.Clientset().CoreV1().Services(ns).Update(t.Context(), a, metav1.UpdateOptions{})
	require.NoError(t, err)

	waitIngress(t, ns, "a", "10.30.0.10")
	assert.Equal(t, []string{"10.30.0.2"}, ingress(t, ns, "b"))
}

package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/api"
	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// stateClient reads talos-ccm's state through its read-only API socket.
func stateClient(t *testing.T, socket string) state.State {
	t.Helper()

	ep, err := api.ParseEndpoint(socket)
	require.NoError(t, err)

	conn, err := api.Dial(ep, api.ClientOptions{})
	require.NoError(t, err)

	t.Cleanup(func() { conn.Close() }) //nolint:errcheck

	return api.NewClientState(conn)
}

// ipAllocations lists the IPAllocations whose IDs start with prefix, by ID; nil when the state cannot be
// read (yet).
func ipAllocations(ctx context.Context, st state.State, prefix string) map[string]*specs.IPAllocationSpec {
	list, err := safe.StateListAll[*ipam.IPAllocation](ctx, st)
	if err != nil {
		return nil
	}

	out := map[string]*specs.IPAllocationSpec{}

	for res := range list.All() {
		if strings.HasPrefix(res.Metadata().ID(), prefix) {
			out[res.Metadata().ID()] = res.TypedSpec().Value
		}
	}

	return out
}

func ipPool(ctx context.Context, st state.State, id string) *specs.IPPoolSpec {
	res, err := safe.StateGetByID[*ipam.IPPool](ctx, st, id)
	if err != nil {
		return nil
	}

	return res.TypedSpec().Value
}

// events returns the messages of the Events with reason about the named object.
func events(ctx context.Context, t *testing.T, namespace, name, reason string) []string {
	t.Helper()

	list, err := env.Clientset().CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	require.NoError(t, err)

	var out []string

	for _, e := range list.Items {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}

	return out
}

func hasPodCIDRs(n *corev1.Node) bool {
	return len(n.Spec.PodCIDRs) > 0
}

// assertDistinctPodCIDRs checks that no pod CIDR of the named Nodes overlaps another, and returns them.
func assertDistinctPodCIDRs(t *testing.T, names []string) map[string][]string {
	t.Helper()

	out := map[string][]string{}

	var all []netip.Prefix

	owners := map[netip.Prefix]string{}

	for _, name := range names {
		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)

		out[name] = n.Spec.PodCIDRs

		if len(n.Spec.PodCIDRs) > 0 {
			assert.Equal(t, n.Spec.PodCIDRs[0], n.Spec.PodCIDR, name)
		}

		for _, s := range n.Spec.PodCIDRs {
			p := netip.MustParsePrefix(s)

			for _, q := range all {
				if p.Overlaps(q) {
					t.Errorf("pod CIDR %s of %s overlaps %s of %s", p, name, q, owners[q])
				}
			}

			all = append(all, p)
			owners[p] = name
		}
	}

	return out
}

// createNode registers a Node directly, as another allocator would have left it, and deletes it at the end.
func createNode(t *testing.T, name string, podCIDRs ...string) {
	t.Helper()

	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR, n.Spec.PodCIDRs = podCIDRs[0], podCIDRs
	}

	_, err := env.Clientset().CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		env.Clientset().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) //nolint:errcheck
	})
}

// TestPodCIDRRangeMode: without --cluster-cidr, the ranges come from a control-plane machine's
// ControllerManagerConfig; every Node gets distinct pod CIDRs, Nodes that already have CIDRs outside the
// range or over another's are reported, and a deleted Node releases its CIDRs.
func TestPodCIDRRangeMode(t *testing.T) {
	machines := fleet("podcidr", 24, 61)
	_, srv := talossim.StartTest(t, machines)

	socket := filepath.Join(socketDir(t), "ccm.sock")

	startCCM(t, srv, app.Options{AllocateNodeCIDRs: true, APIListen: socket})

	st := stateClient(t, socket)

	joinNodes(t, machines)
	waitNodes(t, names(machines), 60*time.Second, hasPodCIDRs)

	cidrs := assertDistinctPodCIDRs(t, names(machines))

	pool := ipPool(t.Context(), st, "pod/ipv4")
	require.NotNil(t, pool)
	assert.Equal(t, []string{talossim.PodCIDRv4}, pool.GetRanges())
	assert.Contains(t, pool.GetSource(), "ControllerManagerConfig of control-plane machine podcidr-")
	assert.Empty(t, pool.GetExcluded(), "the Service range does not overlap the pod range")

	for name, c := range cidrs {
		p := netip.MustParsePrefix(c[0])
		assert.True(t, netip.MustParsePrefix(talossim.PodCIDRv4).Contains(p.Addr()), name)
		assert.Equal(t, 24, p.Bits(), name)
	}

	// Nodes set up by another allocator: one outside the range, one over a CIDR a Node already has.
	taken := cidrs[machines[3].Name]

	createNode(t, "podcidr-outside", "10.99.0.0/24")
	createNode(t, "podcidr-overlap", taken...)

	waitEvents(t, 30*time.Second, "default", "PodCIDRConflict", "podcidr-outside", "podcidr-overlap")

	assert.Contains(t, events(t.Context(), t, "default", "podcidr-overlap", "PodCIDRConflict")[0], "overlaps the pod CIDR of Node/"+machines[3].Name)

	allocs := ipAllocations(t.Context(), st, "node/podcidr-outside/")
	require.NotNil(t, allocs)
	assert.Equal(t, ipam.StateConflict, allocs[ipam.NodeAllocationID("podcidr-outside", "ipv4")].GetState())

	pool = ipPool(t.Context(), st, "pod/ipv4")
	assert.Equal(t, "True", pool.GetConditions()[1].GetStatus(), "the pool reports the conflicts")
	assert.Len(t, pool.GetConflicts(), 2)

	// The Nodes are unchanged: spec.podCIDRs are never rewritten.
	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), machines[3].Name, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, taken, n.Spec.PodCIDRs)

	// A deleted Node releases its allocations.
	gone := machines[5].Name
	require.NoError(t, env.Clientset().CoreV1().Nodes().Delete(t.Context(), gone, metav1.DeleteOptions{}))

	waitReleased(t, st, "node/"+gone+"/", "the allocations of a deleted Node are released")
}

// TestPodCIDRTalosIPv6Mode: the IPv6 pod CIDR of a Node is a /80 of its machine's own /64, the IPv4 one
// from the cluster range; a machine whose prefix is a /128, and one without global IPv6, get a reason and
// an Event, never a nil CIDR.
func TestPodCIDRTalosIPv6Mode(t *testing.T) {
	all := fleet("talos6", 30, 71)

	var machines []talossim.Machine

	for _, m := range all {
		if m.DualStack() && len(machines) < 6 {
			machines = append(machines, m)
		}
	}

	require.Len(t, machines, 6)

	// One machine's IPv6 address is a /128: nothing can be carved from it.
	tiny := &machines[5]

	for i, a := range tiny.Addresses {
		if a.Prefix.Addr().Is6() && a.Scope == "global" && a.LinkName != "kubespan" {
			tiny.Addresses[i].Prefix = netip.PrefixFrom(a.Prefix.Addr(), 128)
		}
	}

	// And one machine is single stack.
	for _, m := range all {
		if !m.DualStack() {
			machines = append(machines, m)

			break
		}
	}

	single := machines[6]

	_, srv := talossim.StartTest(t, machines)

	socket := filepath.Join(socketDir(t), "ccm.sock")

	startCCM(t, srv, app.Options{
		Controllers: []string{"*", "node-ipam"}, NodeIPAMMode: "talos-ipv6", ClusterCIDRs: []string{"10.244.0.0/16"}, APIListen: socket,
	})

	st := stateClient(t, socket)

	joinNodes(t, machines)

	good := names(machines[:5])
	waitNodes(t, good, 60*time.Second, hasPodCIDRs)

	cidrs := assertDistinctPodCIDRs(t, good)

	for _, m := range machines[:5] {
		c := cidrs[m.Name]
		require.Len(t, c, 2, m.Name)
		assert.True(t, netip.MustParsePrefix("10.244.0.0/16").Contains(netip.MustParsePrefix(c[0]).Addr()), m.Name)

		v6 := netip.MustParsePrefix(c[1])
		assert.Equal(t, 80, v6.Bits(), m.Name)

		// Inside the machine's own /64, and not over its address.
		own := m.NodeIPs[1]
		assert.True(t, netip.PrefixFrom(own, 64).Masked().Contains(v6.Addr()), "%s: %s in the prefix of %s", m.Name, v6, own)
		assert.False(t, v6.Contains(own), m.Name)

		assert.NotNil(t, ipPool(t.Context(), st, "node-prefix/"+netip.PrefixFrom(own, 64).Masked().String()), m.Name)
	}

	for _, tc := range []struct {
		name, want string
	}{
		{tiny.Name, "/128 cannot hold a /80 pod CIDR segment"},
		{single.Name, "the machine has no global IPv6 address"},
	} {
		testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "a CIDRNotAvailable Event on "+tc.name, func(context.Context) error {
			if seen := events(t.Context(), t, "default", tc.name, "CIDRNotAvailable"); !slices.ContainsFunc(seen, func(m string) bool { return strings.Contains(m, tc.want) }) {
				return fmt.Errorf("messages %q, none saying %q", seen, tc.want)
			}

			return nil
		})

		alloc := ipAllocations(t.Context(), st, "node/"+tc.name+"/")[ipam.NodeAllocationID(tc.name, "ipv6")]
		assert.Equal(t, ipam.StateFailed, alloc.GetState(), tc.name)
		assert.Contains(t, alloc.GetReason(), tc.want)
		assert.Empty(t, alloc.GetAddress())

		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), tc.name, metav1.GetOptions{})
		require.NoError(t, err)
		assert.Empty(t, n.Spec.PodCIDRs, "%s has no partial or nil pod CIDRs", tc.name)
	}
}

const lbConfig = `loadBalancer:
  pools:
    - name: reserved
      addresses: [198.51.100.0/30]
      namespaces: [lb-reserved]
      allowFirstLastIPs: true
    - name: public
      addresses: ["203.0.113.10-203.0.113.13"]
`

func createService(t *testing.T, ns, name string, mutate func(*corev1.Service)) {
	t.Helper()

	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.ServiceSpec{
			Type:  corev1.ServiceTypeLoadBalancer,
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}},
		},
	}

	if mutate != nil {
		mutate(svc)
	}

	_, err := env.Clientset().CoreV1().Services(ns).Create(t.Context(), svc, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		env.Clientset().CoreV1().Services(ns).Delete(context.Background(), name, metav1.DeleteOptions{}) //nolint:errcheck
	})
}

func ingress(t *testing.T, ns, name string) []string {
	t.Helper()

	svc, err := env.Clientset().CoreV1().Services(ns).Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	var out []string

	for _, i := range svc.Status.LoadBalancer.Ingress {
		out = append(out, i.IP)
	}

	return out
}

func waitIngress(t *testing.T, ns, name string, want ...string) {
	t.Helper()

	testenv.Eventually(t, 30*time.Second, 100*time.Millisecond, fmt.Sprintf("%s/%s: ingress %v", ns, name, want), func(context.Context) error {
		if got := ingress(t, ns, name); !slices.Equal(got, want) {
			return fmt.Errorf("ingress %v", got)
		}

		return nil
	})
}

// waitEvents waits until an Event with the reason is posted on each named object of the namespace.
func waitEvents(t *testing.T, timeout time.Duration, namespace, reason string, names ...string) {
	t.Helper()

	testenv.Eventually(t, timeout, 200*time.Millisecond, reason+" Events", func(context.Context) error {
		return testenv.Every(names, func(name string) error {
			if len(events(t.Context(), t, namespace, name, reason)) == 0 {
				return errors.New("no such Event")
			}

			return nil
		})
	})
}

// waitReleased waits until talos-ccm holds no IPAllocation whose ID starts with prefix (what says which).
func waitReleased(t *testing.T, st state.State, prefix, what string) {
	t.Helper()

	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, what, func(ctx context.Context) error {
		allocs := ipAllocations(ctx, st, prefix)

		switch {
		case allocs == nil:
			return errors.New("the state cannot be read")
		case len(allocs) > 0:
			return fmt.Errorf("allocations %v", slices.Sorted(maps.Keys(allocs)))
		default:
			return nil
		}
	})
}

// TestLoadBalancerServices: Services of type LoadBalancer get IPs from the config file's pools (by
// namespace, in order), share an IP by sharing key, get a requested IP, see a request outside the pools
// rejected with an Event, and release their IPs when deleted or no longer load balancers.
func TestLoadBalancerServices(t *testing.T) {
	machines := fleet("lb", 3, 81)
	_, srv := talossim.StartTest(t, machines)

	for _, ns := range []string{"lb-e2e", "lb-reserved"} {
		_, err := env.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	configFile := filepath.Join(t.TempDir(), "ccm.yaml")
	require.NoError(t, os.WriteFile(configFile, []byte(lbConfig), 0o600))

	socket := filepath.Join(socketDir(t), "ccm.sock")

	startCCM(t, srv, app.Options{Controllers: []string{"*", "service-lb"}, ConfigFile: configFile, APIListen: socket})

	st := stateClient(t, socket)

	const ns = "lb-e2e"

	annotate := func(k, v string) func(*corev1.Service) {
		return func(s *corev1.Service) {
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}

			s.Annotations[k] = v
		}
	}

	createService(t, ns, "first", nil)
	waitIngress(t, ns, "first", "203.0.113.10")

	createService(t, "lb-reserved", "vip", nil)
	waitIngress(t, "lb-reserved", "vip", "198.51.100.0")

	// Sharing: same key, other ports.
	createService(t, ns, "web", annotate(kubekeys.AnnotationSharingKey, "front"))
	waitIngress(t, ns, "web", "203.0.113.11")

	createService(t, ns, "dns", func(s *corev1.Service) {
		annotate(kubekeys.AnnotationSharingKey, "front")(s)
		s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}}
	})
	waitIngress(t, ns, "dns", "203.0.113.11")

	// A specific IP, by annotation and by spec.loadBalancerIP.
	createService(t, ns, "pinned", annotate(kubekeys.AnnotationLoadBalancerIPs, "203.0.113.13"))
	waitIngress(t, ns, "pinned", "203.0.113.13")

	createService(t, ns, "legacy", func(s *corev1.Service) { s.Spec.LoadBalancerIP = "203.0.113.12" })
	waitIngress(t, ns, "legacy", "203.0.113.12")

	// Outside the pools (the reserved pool is not for this namespace): rejected, with an Event.
	createService(t, ns, "outside", annotate(kubekeys.AnnotationLoadBalancerIPs, "198.51.100.1"))

	waitEvents(t, 30*time.Second, ns, "LoadBalancerIPRejected", "outside")

	assert.Contains(t, events(t.Context(), t, ns, "outside", "LoadBalancerIPRejected")[0], "198.51.100.1 is not in a load balancer pool that matches the Service (public)")
	assert.Empty(t, ingress(t, ns, "outside"))

	// Full: the next Service gets an Event too.
	createService(t, ns, "full", nil)

	waitEvents(t, 30*time.Second, ns, "LoadBalancerIPUnavailable", "full")

	pool := ipPool(t.Context(), st, "lb/public/ipv4")
	require.NotNil(t, pool)
	assert.Equal(t, uint64(4), pool.GetSize())
	assert.Equal(t, uint64(0), pool.GetFree())
	assert.Equal(t, "True", pool.GetConditions()[0].GetStatus())

	// Another class is left alone.
	foreignClass := "example.com/lb"
	createService(t, ns, "foreign", func(s *corev1.Service) { s.Spec.LoadBalancerClass = &foreignClass })

	// Release: deleting "first" frees .10, which "full" gets; turning "legacy" into a ClusterIP Service
	// frees .12, which "outside" gets once it asks for it.
	require.NoError(t, env.Clientset().CoreV1().Services(ns).Delete(t.Context(), "first", metav1.DeleteOptions{}))
	waitIngress(t, ns, "full", "203.0.113.10")

	svc, err := env.Clientset().CoreV1().Services(ns).Get(t.Context(), "legacy", metav1.GetOptions{})
	require.NoError(t, err)

	svc.Spec.Type = corev1.ServiceTypeClusterIP
	svc.Spec.LoadBalancerIP = ""
	_, err = env.Clientset().CoreV1().Services(ns).Update(t.Context(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)

	waitReleased(t, st, "service/"+ns+"/legacy/", "the allocation of a Service that is no longer a load balancer is released")

	svc, err = env.Clientset().CoreV1().Services(ns).Get(t.Context(), "outside", metav1.GetOptions{})
	require.NoError(t, err)

	svc.Annotations[kubekeys.AnnotationLoadBalancerIPs] = "203.0.113.12"
	_, err = env.Clientset().CoreV1().Services(ns).Update(t.Context(), svc, metav1.UpdateOptions{})
	require.NoError(t, err)

	waitIngress(t, ns, "outside", "203.0.113.12")

	assert.Empty(t, ingress(t, ns, "foreign"))
	assert.Empty(t, ipAllocations(t.Context(), st, "service/"+ns+"/foreign/"))

	allocs := ipAllocations(t.Context(), st, "service/")
	assert.Equal(t, ipam.OriginShared, allocs[ipam.ServiceAllocationID(ns+"/dns", "ipv4")].GetOrigin())
	assert.Equal(t, ipam.OriginRequested, allocs[ipam.ServiceAllocationID(ns+"/pinned", "ipv4")].GetOrigin())

	waitEvents(t, 10*time.Second, ns, "LoadBalancerIPAllocated", "web")
}

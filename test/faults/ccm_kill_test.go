//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/talossim"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestKillDuringInitialization kills talos-ccm (SIGKILL) while it initializes 1,000 Nodes, with node IPAM on
// and the kubelets asking for serving certificates, some of them for names or IPs that are not theirs, and
// starts it again on the same state directory. In the end every Node is initialized with a pod CIDR of its
// own; every approved request names only its Node's addresses and every hostile one is denied; and no Node
// ever had a providerID other than the one its machine's facts give, also the machines whose providerID
// comes late (after the restart), which must wait for it rather than get the talos:// fallback.
func TestKillDuringInitialization(t *testing.T) {
	const (
		prefix = "kill"
		count  = 1000
		// killAt is how many Nodes the first process initializes before it is killed.
		killAt = 250
	)

	c := sharedCluster()
	machines := machinesFor(prefix, count, 12)

	// Every 40th cloud machine reports no providerID until after the restart.
	served := make([]talossim.Machine, len(machines))
	late := map[string]string{}

	for i, m := range machines {
		served[i] = m.Clone()

		if m.ProviderID != "" && i%40 == 5 {
			late[m.Name] = m.ProviderID
			served[i].ProviderID = ""
		}
	}

	// Every 50th node also asks for a certificate the rules must deny, after its kubelet's own request.
	hostile := map[string]hostileRequest{}

	for i, m := range machines {
		if _, isLate := late[m.Name]; i%50 == 17 && !isLate {
			hostile[m.Name] = hostileRequest{kind: len(hostile) % len(hostileKinds), other: machines[(i+1)%count]}
		}
	}

	cleanupPrefix(t, c, prefix)

	fleet, srv := startSim(t, served)
	nodes := watchNodes(t, c, prefix)
	csrs := watchCSRs(t, c)

	cfg := ccmConfig{
		kubeconfig:  c.kubeconfig(t),
		talosconfig: srv.TalosconfigPath(),
		stateDir:    t.TempDir(),
		socket:      filepath.Join(shortTempDir(t), "ccm.sock"),
		args:        []string{"--allocate-node-cidrs", "--cluster-cidr", "10.128.0.0/12"},
	}

	first := startCCM(t, "first", cfg)
	kubelets := joinKubelets(t, c, machines)

	submitted := submitHostileRequests(t, c, kubelets, nodes, hostile)

	names := machineNames(machines)

	nodes.waitInitializedCount(t, names, killAt, 3*time.Minute, "the first process initializes Nodes")

	first.kill()

	before := nodes.countInitialized(names)
	t.Logf("killed with %d of %d Nodes initialized", before, count)

	if before >= count {
		t.Fatal("the kill must land in the middle of the initialization")
	}

	startCCM(t, "second", cfg)

	// The late providerIDs appear once the second process has seen their machines without one, and waits
	// for them as the first did.
	st := ccmState(t, cfg.socket)

	testenv.Eventually(t, 2*time.Minute, 200*time.Millisecond, "the second process waits for the late providerIDs", func(ctx context.Context) error {
		return testenv.Every(slices.Sorted(maps.Keys(late)), func(name string) error {
			nt, err := decidedNodeTransform(ctx, st, name)
			switch {
			case err != nil:
				return err
			case !strings.Contains(nt.GetPending(), "providerID"):
				return fmt.Errorf("initialize %t, pending %q", nt.GetInitialize(), nt.GetPending())
			default:
				return nil
			}
		})
	})

	for name, id := range late {
		if err := fleet.UpdateMachine(name, func(m *talossim.Machine) { m.ProviderID = id }); err != nil {
			t.Fatal(err)
		}
	}

	nodes.waitNodes(t, names, 4*time.Minute, "initialized with a pod CIDR", func(n *corev1.Node) bool {
		return isInitialized(n) && hasPodCIDR(n)
	})

	// Every kubelet's own request is approved, but those that a hostile request of the same node superseded
	// (denied as superseded, or approved if decided before the hostile one came).
	var kubeletCSRs []string

	for i, request := range kubeletRequests(t, kubelets, names, 2*time.Minute) {
		if !isHostile(hostile, names[i]) {
			kubeletCSRs = append(kubeletCSRs, request)
		}
	}

	csrs.waitVerdicts(t, kubeletCSRs, verdictApproved, 3*time.Minute)
	csrs.waitVerdicts(t, submitted.wait(t, len(hostile)), verdictDenied, 2*time.Minute)

	t.Logf("%d approved requests audited", csrs.auditApprovals(t, nodes, prefix))

	checkDistinctPodCIDRs(t, nodes, names)
	nodes.checkProviderIDs(t, machines)
	nodes.checkNothingUndone(t)
}

// hostileKinds are the requests for what is not the node's: another node's name, another node's IP, a name
// reserved for the cluster's Services, and a wildcard.
var hostileKinds = []func(own *corev1.Node, other talossim.Machine) ([]string, []net.IP){
	func(own *corev1.Node, other talossim.Machine) ([]string, []net.IP) {
		names, ips := nodeSANs(own)

		return append(names, other.Hostname()), ips
	},
	func(own *corev1.Node, other talossim.Machine) ([]string, []net.IP) {
		names, ips := nodeSANs(own)

		return names, append(ips, net.IP(other.NodeIPs[0].AsSlice()))
	},
	func(own *corev1.Node, _ talossim.Machine) ([]string, []net.IP) {
		names, ips := nodeSANs(own)

		return append(names, "kubernetes.default.svc.cluster.local"), ips
	},
	func(own *corev1.Node, _ talossim.Machine) ([]string, []net.IP) {
		names, ips := nodeSANs(own)

		return append(names, "*."+own.Name), ips
	},
}

func isHostile(hostile map[string]hostileRequest, name string) bool {
	_, ok := hostile[name]

	return ok
}

// hostileRequest is a request one node makes for what is not its own.
type hostileRequest struct {
	kind  int
	other talossim.Machine
}

// submissions collects the names of the hostile requests as they are submitted.
type submissions struct {
	mu    sync.Mutex
	names []string
	done  chan struct{}
}

// wait returns the names once all count requests are submitted.
func (s *submissions) wait(t *testing.T, count int) []string {
	t.Helper()

	select {
	case <-s.done:
	case <-time.After(2 * time.Minute):
		t.Fatal("the hostile requests were not all submitted within 2m")
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	if len(s.names) != count {
		t.Fatalf("%d hostile requests submitted, want %d", len(s.names), count)
	}

	return s.names
}

// submitHostileRequests submits, for each hostile node, its hostile request right after its kubelet's own
// (which it supersedes: only the newest request of a node is decided), all through the test, across the kill.
func submitHostileRequests(t *testing.T, c cluster, kubelets *talossim.Kubelets, nodes *nodeHistory, hostile map[string]hostileRequest) *submissions {
	t.Helper()

	s := &submissions{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})

	t.Cleanup(func() {
		cancel()
		<-stopped
	})

	go func() {
		defer close(stopped)

		pending := map[string]hostileRequest{}
		for name, h := range hostile {
			pending[name] = h
		}

		for len(pending) > 0 {
			for name, h := range pending {
				// Strictly newer than the kubelet's: requests created within the same second are ordered by
				// name, and the kubelet's could win.
				if times, _ := kubelets.Times(name); times.CSRName == "" || time.Since(times.CSRSubmitted) < 1100*time.Millisecond {
					continue
				}

				own := nodes.node(name)
				if own == nil {
					continue
				}

				dnsNames, ips := hostileKinds[h.kind](own, h.other)

				csr, err := submitAsNode(ctx, c, name, dnsNames, ips)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("failed to submit the hostile request of %s: %v", name, err)
					}

					return
				}

				s.mu.Lock()
				s.names = append(s.names, csr)
				s.mu.Unlock()

				delete(pending, name)
			}

			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}

		close(s.done)
	}()

	return s
}

// checkDistinctPodCIDRs fails the test for every pod CIDR that overlaps another Node's.
func checkDistinctPodCIDRs(t *testing.T, nodes *nodeHistory, names []string) {
	t.Helper()

	type owned struct {
		prefix netip.Prefix
		node   string
	}

	var all []owned

	for _, name := range names {
		n := nodes.node(name)
		if n == nil {
			continue
		}

		for _, s := range n.Spec.PodCIDRs {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				t.Errorf("%s: pod CIDR %q does not parse: %v", name, s, err)

				continue
			}

			for _, o := range all {
				if o.prefix.Overlaps(p) {
					t.Errorf("pod CIDR %s of %s overlaps %s of %s", p, name, o.prefix, o.node)
				}
			}

			all = append(all, owned{prefix: p, node: name})
		}
	}

	t.Logf("%d pod CIDRs, none allocated twice", len(all))
}

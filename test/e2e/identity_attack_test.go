package e2e_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protojson"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
	noderes "github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// The tests of this file attack talos-ccm as a stolen kubelet credential can (DESIGN.md, section 5a): every
// hostile write is made by a client that impersonates system:node:ATTACKER in system:nodes, so the Node
// authorizer and the NodeRestriction admission plugin of the test control plane hold it to exactly what
// such a credential may do. Each attack has a legitimate victim that must keep working, and no two Nodes may
// ever share a providerID.

const (
	// machineIdentityConflict is the reason of the Warning Event talos-ccm posts on a Node that claims a
	// machine that is not its.
	machineIdentityConflict = "MachineIdentityConflict"
	// notApprovedWindow is how long a hostile request is watched after talos-ccm could have approved it.
	notApprovedWindow = 12 * time.Second
	// outcomeTimeout bounds the wait for talos-ccm's answer to an attack.
	outcomeTimeout = 30 * time.Second
)

// TestAttackNewNodeWithVictimIP: a kubelet credential registers a new Node whose provided-node-ip is the
// victim's IP, then asks for a serving certificate with the victim's names and IPs.
func TestAttackNewNodeWithVictimIP(t *testing.T) {
	const prefix = "idnew"

	machines := fleet(prefix, 2, 61)
	victim := machines[0]

	socket := filepath.Join(socketDir(t), "ccm.sock")
	kubelets := startScene(t, prefix, machines, app.Options{APIListen: socket})
	st := stateClient(t, socket)

	waitNodes(t, names(machines), 60*time.Second, initialized)
	waitKubeletCSRApproved(t, kubelets, victim.Name)

	victimDNS, victimIPs := nodeSANs(t, victim.Name)
	victimIP := victim.NodeIPs[0].String()

	for _, tc := range []struct {
		name    string
		tainted bool
	}{
		{"with the uninitialized taint", true},
		{"without the uninitialized taint", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attacker := prefix + "-rogue-untainted"
			if tc.tainted {
				attacker = prefix + "-rogue-tainted"
			}

			registerKubeletNode(t, attacker, providedNodeIP(victim), tc.tainted)

			hostile := submitCSR(t, attacker, servingRequest{dns: victimDNS, ips: victimIPs})

			waitAttackOutcome(t, st, attacker, hasConflict, func(n *corev1.Node) bool {
				return n.Spec.ProviderID != "" || len(n.Status.Addresses) > 0 || tc.tainted && !hasUninitializedTaint(n)
			})

			n := getNode(t, attacker)
			assert.Empty(t, n.Spec.ProviderID, "the attacker's Node must not get a providerID")
			assertNoAddressOf(t, n, victimDNS, victimIPs)
			assertNoLabelsOf(t, n, victim)
			assert.Equal(t, tc.tainted, hasUninitializedTaint(n), "the uninitialized taint must stay as the kubelet registered it")

			nt := nodeTransform(t, st, attacker)
			assert.False(t, nt.Initialize, "NodeTransform %s: initialize", attacker)
			assert.Contains(t, nt.Conflict, victim.Name, "NodeTransform %s: conflict must name the victim node", attacker)
			assert.Contains(t, nt.Conflict, victimIP, "NodeTransform %s: conflict must name the machine's address", attacker)

			assertEvent(t, attacker, machineIdentityConflict)
			assertNeverApproved(t, hostile, notApprovedWindow)
		})
	}

	assertVictimIntact(t, kubelets, victim)
}

// TestAttackOwnNodeRepointed: the kubelet of an initialized Node, with its own machine, points its
// provided-node-ip annotation at the victim's IP and asks for a certificate with the victim's names.
func TestAttackOwnNodeRepointed(t *testing.T) {
	socket := filepath.Join(socketDir(t), "ccm.sock")
	victim, own, kubelets := attackScene(t, "idrepoint", 62, app.Options{APIListen: socket})
	attacker := own.Name
	st := stateClient(t, socket)

	victimDNS, victimIPs := nodeSANs(t, victim.Name)
	ownDNS, ownIPs := nodeSANs(t, attacker)
	victimIP := victim.NodeIPs[0].String()
	want := expect(own, talossim.DefaultClusterName)

	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, kubekeys.AnnotationProvidedNodeIP, providedNodeIP(victim))
	_, err := kubeletClientset(t, attacker).CoreV1().Nodes().Patch(t.Context(), attacker, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err, "a kubelet may edit its own Node's annotations")

	waitAttackOutcome(t, st, attacker, hasConflict, func(n *corev1.Node) bool {
		return slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool { return a.Address == victimIP })
	})

	n := getNode(t, attacker)
	assert.Equal(t, want.providerID, n.Spec.ProviderID)
	assert.ElementsMatch(t, want.addresses, n.Status.Addresses, "the attacker's Node must keep its own machine's addresses")
	assertNoAddressOf(t, n, victimDNS, victimIPs)

	nt := nodeTransform(t, st, attacker)
	assert.Equal(t, want.providerID, nt.ProviderID, "NodeTransform %s: providerID", attacker)
	assert.ElementsMatch(t, want.addresses, nt.nodeAddresses(), "NodeTransform %s must keep the verified addresses", attacker)
	assert.Contains(t, nt.Conflict, victim.Name, "NodeTransform %s: conflict must name the victim node", attacker)

	assertEvent(t, attacker, machineIdentityConflict)

	// The newest pending request of a node supersedes the older ones, so the hostile request is watched
	// before the legitimate one is made.
	hostile := submitCSR(t, attacker, servingRequest{dns: victimDNS, ips: victimIPs})
	assertNeverApproved(t, hostile, notApprovedWindow)

	legit := submitCSR(t, attacker, servingRequest{dns: ownDNS, ips: ownIPs})
	cond := waitCSRDecided(t, legit, outcomeTimeout)
	assert.Equal(t, certificatesv1.CertificateApproved, cond.Type, "the attacker's request for its own names: %s", cond.Message)

	assertVictimIntact(t, kubelets, victim)
}

// TestAttackForgedStatusAddresses: a kubelet adds the victim's addresses to its own Node's status and at
// once asks for a certificate with the victim's DNS names. The request must never be approved: talos-ccm
// must compare it with what it verified of the requester's machine, not with what the kubelet wrote.
func TestAttackForgedStatusAddresses(t *testing.T) {
	victim, own, kubelets := attackScene(t, "idforge", 63, app.Options{})
	attacker := own.Name

	victimNode := getNode(t, victim.Name)
	victimDNS, _ := addressSANs(victimNode.Status.Addresses)
	_, ownIPs := nodeSANs(t, attacker)

	// A few rounds: the forged status and talos-ccm's own addresses race, and one round may miss the window.
	hostile := forgeAndRequest(t, attacker, victimNode.Status.Addresses, servingRequest{dns: victimDNS, ips: ownIPs}, 3)

	for _, name := range hostile {
		assertNotApprovedNow(t, name)
	}

	assertVictimIntact(t, kubelets, victim)
}

// TestAttackForgedStatusAddressesWithoutTalos: the same forgery with talos-ccm in CSR-only mode (no Talos
// API). There the Node's status is all talos-ccm has: it cannot tell the victim's addresses that another
// cloud controller manager wrote from the ones the kubelet added, so the test does not require a denial.
// What it asserts is that talos-ccm is honest about it: a decision that approves says that its evidence is
// the kubelet's own claim, and the victim's own request is still approved.
func TestAttackForgedStatusAddressesWithoutTalos(t *testing.T) {
	t.Setenv("TALOSCONFIG", "")

	const (
		victim   = "idforgenotalos-victim"
		attacker = "idforgenotalos-rogue"
	)

	socket := filepath.Join(socketDir(t), "ccm.sock")
	startCCM(t, nil, app.Options{Controllers: []string{"csr-approval"}, APIListen: socket})
	decisions := recordDecisions(t, stateClient(t, socket))

	addresses := map[string][]corev1.NodeAddress{
		victim:   {{Type: corev1.NodeInternalIP, Address: "10.210.0.1"}, {Type: corev1.NodeHostName, Address: victim}, {Type: corev1.NodeInternalDNS, Address: victim + ".internal.example"}},
		attacker: {{Type: corev1.NodeInternalIP, Address: "10.210.0.2"}, {Type: corev1.NodeHostName, Address: attacker}},
	}

	// Both kubelets register; another cloud controller manager (the admin here) has initialized both Nodes.
	for _, name := range []string{victim, attacker} {
		registerKubeletNode(t, name, addresses[name][0].Address, false)

		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n := getNode(t, name)
			n.Status.Addresses = addresses[name]
			_, err := env.Clientset().CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})

			return err
		})
		require.NoError(t, err)
	}

	victimDNS, victimIPs := addressSANs(addresses[victim])
	legit := submitCSR(t, victim, servingRequest{dns: victimDNS, ips: victimIPs})
	cond := waitCSRDecided(t, legit, outcomeTimeout)
	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, "the victim's own request: %s", cond.Message)

	_, ownIPs := addressSANs(addresses[attacker])
	hostile := forgeAndRequest(t, attacker, addresses[victim], servingRequest{dns: victimDNS, ips: ownIPs}, 1)

	for _, name := range hostile {
		approvals := decisions.approvals(t, name)
		if len(approvals) == 0 {
			continue
		}

		d := approvals[len(approvals)-1]

		evidence := []string{d.GetReason()}
		for _, r := range d.GetRules() {
			evidence = append(evidence, r.GetReason())
		}

		assert.Contains(t, strings.Join(evidence, "\n"), "kubelet's own claim",
			"an approval in CSR-only mode must say that its evidence is the kubelet's own claim: %s", d.GetReason())
	}
}

// TestMachineIdentityNotProven: a machine that publishes no Nodename, and one whose Nodename names another
// node, are not any Node's: their Nodes are not initialized, and their NodeTransforms say why.
func TestMachineIdentityNotProven(t *testing.T) {
	const prefix = "idnodename"

	machines := fleet(prefix, 3, 64)
	victim := machines[0]
	silent, liar := &machines[1], &machines[2]
	silent.NoNodename = true
	liar.Nodename = victim.Name

	socket := filepath.Join(socketDir(t), "ccm.sock")
	kubelets := startScene(t, prefix, machines, app.Options{APIListen: socket})
	st := stateClient(t, socket)

	waitNodes(t, []string{victim.Name}, 60*time.Second, initialized)
	waitKubeletCSRApproved(t, kubelets, victim.Name)

	for _, tc := range []struct {
		node string
		// why is a part of what the NodeTransform says (conflict or pending).
		why string
	}{
		{silent.Name, "Nodename"},
		{liar.Name, victim.Name},
	} {
		waitAttackOutcome(t, st, tc.node,
			func(nt transformView) bool { return strings.Contains(nt.Conflict+"\n"+nt.Pending, tc.why) },
			func(n *corev1.Node) bool { return !hasUninitializedTaint(n) || n.Spec.ProviderID != "" })

		n := getNode(t, tc.node)
		assert.True(t, hasUninitializedTaint(n), "%s must not be initialized", tc.node)
		assert.Empty(t, n.Spec.ProviderID, "%s must get no providerID", tc.node)

		nt := nodeTransform(t, st, tc.node)
		assert.False(t, nt.Initialize, "NodeTransform %s: initialize", tc.node)
		assert.Contains(t, nt.Conflict+"\n"+nt.Pending, tc.why, "NodeTransform %s must say why", tc.node)
	}

	assertVictimIntact(t, kubelets, victim)
}

// attackScene starts the scene of an attack: two machines, the victim and the attacker's own, initialized by
// talos-ccm (started with opts) with both kubelets' serving certificates approved, and a watch that fails
// the test when two Nodes ever share a providerID.
func attackScene(t *testing.T, prefix string, seed int64, opts app.Options) (victim, own talossim.Machine, kubelets *talossim.Kubelets) {
	t.Helper()

	machines := fleet(prefix, 2, seed)

	kubelets = startScene(t, prefix, machines, opts)
	waitNodes(t, names(machines), 60*time.Second, initialized)

	for _, m := range machines {
		waitKubeletCSRApproved(t, kubelets, m.Name)
	}

	return machines[0], machines[1], kubelets
}

// startScene serves the machines (named PREFIX-...) to talos-ccm, started with opts, with a watch that fails
// the test when two Nodes ever share a providerID, and joins their kubelets.
func startScene(t *testing.T, prefix string, machines []talossim.Machine, opts app.Options) *talossim.Kubelets {
	t.Helper()

	_, srv := talossim.StartTest(t, machines)
	startCCM(t, srv, opts)

	watchProviderIDs(t, prefix+"-")

	return joinNodes(t, machines)
}

// kubeletClientset returns a clientset that acts as the node's kubelet, as a stolen kubelet credential does.
func kubeletClientset(t *testing.T, node string) kubernetes.Interface {
	t.Helper()

	clientset, err := kubernetes.NewForConfig(talossim.NodeConfig(env.Config, node))
	require.NoError(t, err)

	return clientset
}

// providedNodeIP is the provided-node-ip annotation of the machine's kubelet: every node IP, comma-separated.
func providedNodeIP(m talossim.Machine) string {
	ips := make([]string, 0, len(m.NodeIPs))
	for _, ip := range m.NodeIPs {
		ips = append(ips, ip.String())
	}

	return strings.Join(ips, ",")
}

// registerKubeletNode creates a Node as its kubelet registers it (with --cloud-provider=external when
// tainted), announcing ip (one IP, or a comma-separated pair) as its provided-node-ip, and deletes it when
// the test ends.
func registerKubeletNode(t *testing.T, name, ip string, tainted bool) {
	t.Helper()

	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      map[string]string{corev1.LabelHostname: name, corev1.LabelOSStable: "linux", corev1.LabelArchStable: "amd64"},
		Annotations: map[string]string{kubekeys.AnnotationProvidedNodeIP: ip},
	}}

	if tainted {
		n.Spec.Taints = []corev1.Taint{{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}

	_, err := kubeletClientset(t, name).CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		_ = env.Clientset().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// forgeAndRequest adds forged to the node's status addresses as its kubelet, and at once submits the
// request as that node, rounds times, returning the requests. It stops early once one is approved.
func forgeAndRequest(t *testing.T, node string, forged []corev1.NodeAddress, r servingRequest, rounds int) []string {
	t.Helper()

	nodes := kubeletClientset(t, node).CoreV1().Nodes()

	var requests []string

	for range rounds {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			n, err := nodes.Get(t.Context(), node, metav1.GetOptions{})
			if err != nil {
				return err
			}

			for _, a := range forged {
				if !slices.Contains(n.Status.Addresses, a) {
					n.Status.Addresses = append(n.Status.Addresses, a)
				}
			}

			_, err = nodes.UpdateStatus(t.Context(), n, metav1.UpdateOptions{})

			return err
		})
		require.NoError(t, err, "a kubelet may write its own Node's status")

		name := submitCSR(t, node, r)
		requests = append(requests, name)

		// Wait for a decision a little while; a request still pending is superseded by the next round's.
		cond, err := csrDecision(t.Context(), name, 5*time.Second)
		if err != nil {
			t.Log(err)
		}

		if cond.Type == certificatesv1.CertificateApproved {
			break
		}
	}

	return requests
}

// transformView is the part of a NodeTransform the tests read, decoded from its JSON form, so that a field
// the running talos-ccm does not have reads as empty instead of failing to compile.
type transformView struct {
	ProviderID string `json:"providerID"`
	Initialize bool   `json:"initialize"`
	Pending    string `json:"pending"`
	Conflict   string `json:"conflict"`
	Addresses  []struct {
		Type    string `json:"type"`
		Address string `json:"address"`
	} `json:"addresses"`
}

func (v transformView) nodeAddresses() []corev1.NodeAddress {
	out := make([]corev1.NodeAddress, 0, len(v.Addresses))
	for _, a := range v.Addresses {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeAddressType(a.Type), Address: a.Address})
	}

	return out
}

// nodeTransform reads the node's NodeTransform from talos-ccm's state API, or an empty one when it has none.
func nodeTransform(t *testing.T, st state.State, name string) transformView {
	t.Helper()

	var v transformView

	res, err := safe.StateGetByID[*noderes.NodeTransform](t.Context(), st, name)
	if err != nil {
		if !state.IsNotFoundError(err) {
			t.Errorf("failed to read NodeTransform %s: %v", name, err)
		}

		return v
	}

	raw, err := protojson.Marshal(res.TypedSpec().Value)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(raw, &v))

	return v
}

// waitAttackOutcome waits (bounded) until talos-ccm has answered the Node's claim one way or the other: its
// NodeTransform says it refuses it (refused), or the Node shows that the attack succeeded (succeeded). The
// caller asserts which.
func waitAttackOutcome(t *testing.T, st state.State, name string, refused func(transformView) bool, succeeded func(*corev1.Node) bool) {
	t.Helper()

	// No answer is an outcome too, which the caller's assertions judge.
	if err := testenv.WaitFor(t.Context(), outcomeTimeout, 100*time.Millisecond, "talos-ccm's answer about node "+name, func(ctx context.Context) error {
		nt := nodeTransform(t, st, name)
		if refused(nt) {
			return nil
		}

		n, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}

		if succeeded(n) {
			return nil
		}

		return fmt.Errorf("NodeTransform %+v", nt)
	}); err != nil {
		t.Log(err)
	}
}

// hasConflict is the refusal of a Node that claims another node's machine.
func hasConflict(nt transformView) bool {
	return nt.Conflict != ""
}

// watchProviderIDs fails the test if two Nodes whose names start with prefix ever share a providerID, as
// seen by a Node watch from now until the test ends.
func watchProviderIDs(t *testing.T, prefix string) {
	t.Helper()

	var (
		mu         sync.Mutex
		providerID = map[string]string{}
		violations []string
	)

	observe := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok || !strings.HasPrefix(n.Name, prefix) {
			return
		}

		mu.Lock()
		defer mu.Unlock()

		providerID[n.Name] = n.Spec.ProviderID

		if n.Spec.ProviderID == "" {
			return
		}

		for other, id := range providerID {
			if other != n.Name && id == n.Spec.ProviderID {
				violations = append(violations, fmt.Sprintf("%s and %s share providerID %s", n.Name, other, id))
			}
		}
	}

	factory := informers.NewSharedInformerFactory(env.Clientset(), 0)
	_, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    observe,
		UpdateFunc: func(_, obj any) { observe(obj) },
		DeleteFunc: func(obj any) {
			if n, ok := obj.(*corev1.Node); ok {
				mu.Lock()
				delete(providerID, n.Name)
				mu.Unlock()
			}
		},
	})
	require.NoError(t, err)

	stop := make(chan struct{})
	factory.Start(stop)
	factory.WaitForCacheSync(stop)

	t.Cleanup(func() {
		close(stop)
		factory.Shutdown()

		mu.Lock()
		defer mu.Unlock()

		for _, v := range slices.Compact(slices.Sorted(slices.Values(violations))) {
			t.Errorf("two Nodes shared a providerID: %s", v)
		}
	})
}

// waitKubeletCSRApproved waits until the simulated kubelet of the node has submitted its serving request
// and talos-ccm has approved it.
func waitKubeletCSRApproved(t *testing.T, kubelets *talossim.Kubelets, node string) {
	t.Helper()

	request := kubeletRequests(t, kubelets, []string{node}, outcomeTimeout)[node]

	cond := waitCSRDecided(t, request, outcomeTimeout)
	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, "the request of %s: %s", node, cond.Message)
}

// assertVictimIntact checks that the victim is still what its machine says after the attack: initialized,
// its providerID, labels and addresses its machine's, its kubelet's request approved, and a new request
// for its own names approved too (an attack must not cost the victim its certificates either).
func assertVictimIntact(t *testing.T, kubelets *talossim.Kubelets, victim talossim.Machine) {
	t.Helper()

	waitKubeletCSRApproved(t, kubelets, victim.Name)

	want := expect(victim, talossim.DefaultClusterName)
	n := getNode(t, victim.Name)

	assert.True(t, initialized(n), "the victim %s must stay initialized", victim.Name)
	assert.Equal(t, want.providerID, n.Spec.ProviderID, "the victim's providerID")
	assert.ElementsMatch(t, want.addresses, n.Status.Addresses, "the victim's addresses")

	for key, value := range want.labels {
		assert.Equal(t, value, n.Labels[key], "the victim's label %s", key)
	}

	dns, ips := addressSANs(want.addresses)
	cond := waitCSRDecided(t, submitCSR(t, victim.Name, servingRequest{dns: dns, ips: ips}), outcomeTimeout)
	assert.Equal(t, certificatesv1.CertificateApproved, cond.Type, "the victim's new request for its own names: %s", cond.Message)
}

// assertNoAddressOf checks that the Node carries none of the names and IPs.
func assertNoAddressOf(t *testing.T, n *corev1.Node, dns, ips []string) {
	t.Helper()

	for _, a := range n.Status.Addresses {
		assert.False(t, slices.Contains(dns, a.Address) || slices.Contains(ips, a.Address),
			"node %s got the victim's address %s %s", n.Name, a.Type, a.Address)
	}
}

// assertNoLabelsOf checks that the Node carries none of the labels talos-ccm gives the victim's machine.
func assertNoLabelsOf(t *testing.T, n *corev1.Node, victim talossim.Machine) {
	t.Helper()

	for key := range expect(victim, talossim.DefaultClusterName).labels {
		_, ok := n.Labels[key]
		assert.False(t, ok, "node %s got the label %s=%s from the victim's machine", n.Name, key, n.Labels[key])
	}
}

// assertEvent checks (waiting boundedly) that an Event with the reason is posted on the Node.
func assertEvent(t *testing.T, node, reason string) {
	t.Helper()

	selector := fields.Set{"involvedObject.kind": "Node", "involvedObject.name": node, "reason": reason}.AsSelector().String()

	assert.NoError(t, testenv.WaitFor(t.Context(), outcomeTimeout, 100*time.Millisecond, fmt.Sprintf("a %s Event on Node %s", reason, node),
		func(ctx context.Context) error { return eventPosted(ctx, selector) }))
}

// assertNeverApproved checks that the request is not approved during the window (denied or pending are fine).
func assertNeverApproved(t *testing.T, name string, during time.Duration) {
	t.Helper()

	assert.NoError(t, testenv.HoldFor(t.Context(), during, 200*time.Millisecond, "hostile certificate request "+name+" not approved",
		func(ctx context.Context) error { return notApproved(ctx, name) }))
}

// assertNotApprovedNow checks that the request is not approved (denied or pending are fine).
func assertNotApprovedNow(t *testing.T, name string) {
	t.Helper()

	assert.NoError(t, notApproved(t.Context(), name), "hostile certificate request %s", name)
}

// notApproved returns nil when the request is pending or denied, and an error that says so when approved.
func notApproved(ctx context.Context, name string) error {
	cond, err := decidedCondition(ctx, name)

	switch {
	case err != nil && !errors.Is(err, errPending):
		return err
	case cond.Type == certificatesv1.CertificateApproved:
		return fmt.Errorf("approved: %s", cond.Message)
	default:
		return nil
	}
}

// decisionRecorder keeps every CSRDecision talos-ccm publishes, by request: a decision leaves the state
// once its request is approved, so it is watched, not read afterwards.
type decisionRecorder struct {
	mu        sync.Mutex
	decisions map[string][]*specs.CSRDecisionSpec
}

// recordDecisions watches the CSRDecisions of talos-ccm's state from now until the test ends.
func recordDecisions(t *testing.T, st state.State) *decisionRecorder {
	t.Helper()

	rec := &decisionRecorder{decisions: map[string][]*specs.CSRDecisionSpec{}}
	ch := make(chan state.Event)

	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)

	// talos-ccm starts its API in the background: wait until it answers.
	testenv.Eventually(t, outcomeTimeout, 100*time.Millisecond, "talos-ccm's state API answers", func(ctx context.Context) error {
		_, err := safe.StateListAll[*csrres.CSRDecision](ctx, st)

		return err
	})

	md := resource.NewMetadata(csrres.NamespaceName, csrres.CSRDecisionType, "", resource.VersionUndefined)
	require.NoError(t, st.WatchKind(ctx, md, ch))

	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-ch:
				d, ok := ev.Resource.(*csrres.CSRDecision)
				if !ok || (ev.Type != state.Created && ev.Type != state.Updated) {
					continue
				}

				rec.mu.Lock()
				rec.decisions[d.Metadata().ID()] = append(rec.decisions[d.Metadata().ID()], d.TypedSpec().Value)
				rec.mu.Unlock()
			}
		}
	}()

	return rec
}

// approvals returns the decisions that approved the request, waiting (bounded) for the first decision
// that is not "wait".
func (rec *decisionRecorder) approvals(t *testing.T, name string) []*specs.CSRDecisionSpec {
	t.Helper()

	var seen, approved []*specs.CSRDecisionSpec

	// Decisions that all wait are judged by the caller too, once the wait is over.
	err := testenv.WaitFor(t.Context(), outcomeTimeout, 100*time.Millisecond, "a decision about "+name+" that does not wait", func(context.Context) error {
		rec.mu.Lock()
		seen = slices.Clone(rec.decisions[name])
		rec.mu.Unlock()

		if !slices.ContainsFunc(seen, func(d *specs.CSRDecisionSpec) bool { return d.GetVerdict() != "wait" }) {
			return fmt.Errorf("%d decisions, all wait", len(seen))
		}

		return nil
	})

	require.NotEmpty(t, seen, "talos-ccm published no decision about %s: %v", name, err)

	for _, d := range seen {
		if d.GetVerdict() == "approve" {
			approved = append(approved, d)
		}
	}

	return approved
}

func getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()

	n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	return n
}

func hasUninitializedTaint(n *corev1.Node) bool {
	return !initialized(n)
}

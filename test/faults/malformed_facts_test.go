//go:build faults

package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	noderes "github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// malformedRules template a tag into a label and every tag into an annotation, so that hostile tags reach
// the rules too.
const malformedRules = `transformations:
  - name: owner
    nodeSelector:
      - matchExpressions:
          - key: tags.owner
            operator: Exists
    labels:
      example.com/owner: "{{ .Tags.owner }}"
    annotations:
      example.com/tags: "{{ .Tags }}"
`

// malformedCase is a machine that reports malformed facts, and what must come of it.
type malformedCase struct {
	name string
	// machine changes the facts of a generated aws machine (what a Machine can describe).
	machine func(m *talossim.Machine)
	// raw returns resources to serve verbatim instead of those built from the facts.
	raw func(m talossim.Machine) map[talossim.Kind][]resource.Resource
	// recorded are what talos-ccm must say it left out: each must appear (in any case) in a warning or the
	// pending reason of the NodeTransform.
	recorded []string
	// pending, when set, is what the machine's Node must be waiting for (in its NodeTransform's pending
	// reason): what was left out is something talos-ccm waits for. Every other case leaves out only the bad
	// part, so its Node must be initialized.
	pending string
	// providerIDOrigin and internalIPOrigin must be the origins of the providerID and of the Node's first
	// InternalIP, for every initialized case.
	providerIDOrigin, internalIPOrigin string
}

// TestMalformedTalosFacts serves machines whose Talos facts are malformed (an empty PlatformMetadata,
// thousands of tags, label values Kubernetes refuses, a providerID and DNS names too long or invalid,
// addresses without a prefix or link, unspecified and multicast addresses, thousands of addresses) next to
// good machines. talos-ccm must not crash or log errors, must initialize the good machines as usual, must
// never write a half-applied Node (initialized with everything it decided, or untouched with the reason it
// waits), must put only valid addresses on Nodes, and must record what it left out or assumed.
func TestMalformedTalosFacts(t *testing.T) {
	const prefix = "malformed"

	c := sharedCluster()

	cases := malformedCases()
	machines := machinesFor(prefix, 7+len(cases), 61)
	good := machines[:7]
	bad := machines[7:]

	for i, tc := range cases {
		m := &bad[i]
		// Every case starts from a cloud machine with a providerID, whatever the generator gave at that index.
		m.Name = prefix + "-" + tc.name
		m.Platform, m.NoPlatformMetadata, m.ProviderID = "aws", false, "aws:///us-east-1a/i-"+tc.name
		m.Region, m.Zone = "us-east-1", "us-east-1a"

		if tc.machine != nil {
			tc.machine(m)
		}
	}

	cleanupPrefix(t, c, prefix)

	fleet, srv := startSim(t, machines)

	for i, tc := range cases {
		if tc.raw == nil {
			continue
		}

		for kind, res := range tc.raw(bad[i]) {
			if err := fleet.SetRawResources(bad[i].Name, kind, res); err != nil {
				t.Fatal(err)
			}
		}
	}

	configFile := filepath.Join(t.TempDir(), "talos-ccm.yaml")
	if err := os.WriteFile(configFile, []byte(malformedRules), 0o600); err != nil {
		t.Fatal(err)
	}

	socket := filepath.Join(shortTempDir(t), "ccm.sock")
	nodes := watchNodes(t, c, prefix)
	ccm := startCCM(t, "ccm", ccmConfig{
		kubeconfig: c.kubeconfig(t), talosconfig: srv.TalosconfigPath(), socket: socket, race: true,
		args: []string{"--config", configFile},
	})
	st := ccmState(t, socket)

	joinKubelets(t, c, machines)

	// The good machines are initialized as usual, next to the bad ones.
	nodes.waitNodes(t, machineNames(good), 2*time.Minute, "initialized", isInitialized)

	// Every bad machine gets the decision its case expects: initialized (its Node too), or pending for what
	// was left out. A decision pending for another reason is not final (the facts of a machine with
	// thousands of addresses take a while): waiting only for "some decision" let the check below catch a
	// machine turning from pending to initialized.
	pendingFor := map[string]string{}
	for i, tc := range cases {
		pendingFor[bad[i].Name] = tc.pending
	}

	decidedAll := func(ctx context.Context) error {
		if !ccm.running() {
			return errExited
		}

		return testenv.Every(machineNames(bad), func(name string) error {
			nt, err := decidedNodeTransform(ctx, st, name)
			if err != nil {
				return err
			}

			if want := pendingFor[name]; want != "" {
				if nt.GetInitialize() || !strings.Contains(nt.GetPending(), want) {
					return fmt.Errorf("initialize %t, pending %q: not waiting for %s", nt.GetInitialize(), nt.GetPending(), want)
				}

				return nil
			}

			if !nt.GetInitialize() {
				return fmt.Errorf("pending %q, not initialized", nt.GetPending())
			}

			if n := nodes.node(name); n == nil || !isInitialized(n) {
				return errors.New("decided initialized, Node not initialized yet")
			}

			return nil
		})
	}

	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "talos-ccm decides about every malformed machine", decidedAll)

	// Then talos-ccm has time to do anything more it would do: its decisions stand, and it keeps running.
	testenv.Consistently(t, 5*time.Second, 200*time.Millisecond, "talos-ccm's decisions about the malformed machines stand", decidedAll)

	ccm.requireRunning()

	decided := map[string]*specs.NodeTransformSpec{}

	for i, tc := range cases {
		m := bad[i]
		n := nodes.node(m.Name)
		nt := nodeTransform(t, st, m.Name)
		decided[tc.name] = nt

		t.Logf("%s: initialize=%t pending=%q warnings=%d (%s) providerID origin=%q InternalIP origin=%q addresses=%v", tc.name,
			nt.GetInitialize(), nt.GetPending(), len(nt.GetWarnings()), shorten(strings.Join(nt.GetWarnings(), "; "), 300),
			nt.GetOrigins()["providerID"], internalIPOrigin(nt), shortenAddresses(n.Status.Addresses))
	}

	// Leaving out the bad part means the rest is applied: a Node that stays pending passes the checks below
	// without proving anything, so every case says which it must be.
	t.Run("initialized unless waiting for what was left out", func(t *testing.T) {
		for i, tc := range cases {
			nt, n := decided[tc.name], nodes.node(bad[i].Name)

			switch {
			case tc.pending == "" && !isInitialized(n):
				t.Errorf("%s: not initialized (pending %q), though only its bad facts are to be left out", tc.name, nt.GetPending())
			case tc.pending != "" && isInitialized(n):
				t.Errorf("%s: initialized, though it must wait for %s", tc.name, tc.pending)
			case tc.pending != "" && !strings.Contains(nt.GetPending(), tc.pending):
				t.Errorf("%s: pending %q, not waiting for %s", tc.name, nt.GetPending(), tc.pending)
			}
		}
	})

	t.Run("never half-applied", func(t *testing.T) {
		for i := range cases {
			checkWholeOrNothing(t, bad[i], nodes.node(bad[i].Name), decided[cases[i].name])
		}

		nodes.checkNothingUndone(t)
	})

	t.Run("only valid addresses on Nodes", func(t *testing.T) {
		for _, m := range bad {
			for _, a := range nodes.node(m.Name).Status.Addresses {
				if err := validNodeAddress(a); err != nil {
					t.Errorf("%s: address %s %q: %v", m.Name, a.Type, shorten(a.Address, 80), err)
				}
			}
		}
	})

	t.Run("a recorded reason for what was left out", func(t *testing.T) {
		for _, tc := range cases {
			nt := decided[tc.name]
			record := strings.ToLower(strings.Join(append(slices.Clone(nt.GetWarnings()), nt.GetPending()), "\n"))

			for _, want := range tc.recorded {
				if !strings.Contains(record, strings.ToLower(want)) {
					t.Errorf("%s: nothing recorded about %s (warnings: %q)", tc.name, want, shorten(strings.Join(nt.GetWarnings(), "; "), 300))
				}
			}

			if tc.pending != "" {
				continue
			}

			if origin := nt.GetOrigins()["providerID"]; origin != tc.providerIDOrigin {
				t.Errorf("%s: the providerID's origin is %q, want %q", tc.name, origin, tc.providerIDOrigin)
			}

			if origin := internalIPOrigin(nt); origin != tc.internalIPOrigin {
				t.Errorf("%s: the InternalIP's origin is %q, want %q", tc.name, origin, tc.internalIPOrigin)
			}
		}
	})
}

// internalIPOrigin is the origin of the first InternalIP a NodeTransform decided, "" without one.
func internalIPOrigin(nt *specs.NodeTransformSpec) string {
	for _, a := range nt.GetAddresses() {
		if a.GetType() == string(corev1.NodeInternalIP) {
			return noderes.AddressOrigin(nt, a)
		}
	}

	return ""
}

// validNodeAddress checks a Node address as a client of the Node would use it: an IP that can be dialed, or
// a DNS name.
func validNodeAddress(a corev1.NodeAddress) error {
	switch a.Type {
	case corev1.NodeInternalIP, corev1.NodeExternalIP:
		ip, err := netip.ParseAddr(a.Address)

		switch {
		case err != nil:
			return err
		case ip.IsUnspecified(), ip.IsMulticast(), ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
			return errors.New("not the address of a machine")
		}
	case corev1.NodeHostName, corev1.NodeInternalDNS, corev1.NodeExternalDNS:
		if errs := validation.IsDNS1123Subdomain(strings.ToLower(a.Address)); len(errs) > 0 {
			return errors.New(errs[0])
		}
	}

	return nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}

	return s[:n] + fmt.Sprintf("...(%d bytes)", len(s))
}

func shortenAddresses(addresses []corev1.NodeAddress) string {
	parts := make([]string, 0, len(addresses))
	for _, a := range addresses {
		parts = append(parts, string(a.Type)+" "+shorten(a.Address, 40))
	}

	return "[" + strings.Join(parts, ", ") + "]"
}

// checkWholeOrNothing fails the test for a half-applied Node: an initialized Node has everything talos-ccm
// decided; an uninitialized one has none of it, and its NodeTransform says what it waits for.
func checkWholeOrNothing(t *testing.T, m talossim.Machine, n *corev1.Node, nt *specs.NodeTransformSpec) {
	t.Helper()

	if isInitialized(n) {
		if n.Spec.ProviderID != nt.GetProviderId() {
			t.Errorf("%s: initialized with providerID %q, talos-ccm decided %q", n.Name, n.Spec.ProviderID, nt.GetProviderId())
		}

		for key, value := range nt.GetLabels() {
			if n.Labels[key] != value {
				t.Errorf("%s: initialized without the label %s=%q", n.Name, key, value)
			}
		}

		for _, a := range nt.GetAddresses() {
			want := corev1.NodeAddress{Type: corev1.NodeAddressType(a.GetType()), Address: a.GetAddress()}
			if !containsAddress(n.Status.Addresses, want) {
				t.Errorf("%s: initialized without the address %v", n.Name, want)
			}
		}

		return
	}

	if nt.GetPending() == "" {
		t.Errorf("%s: not initialized, and its NodeTransform does not say why", n.Name)
	}

	// The addresses the kubelet posted when it registered are its own, not talos-ccm's.
	if n.Spec.ProviderID != "" || !slices.Equal(n.Status.Addresses, talossim.KubeletFirstAddresses(m)) {
		t.Errorf("%s: half-applied: not initialized, but has providerID %q and addresses %v (its kubelet posted %v)",
			n.Name, n.Spec.ProviderID, n.Status.Addresses, talossim.KubeletFirstAddresses(m))
	}

	for key := range n.Labels {
		if strings.HasPrefix(key, "topology.kubernetes.io/") || strings.HasPrefix(key, "node.cloudprovider.kubernetes.io/") ||
			strings.HasPrefix(key, "example.com/") {
			t.Errorf("%s: half-applied: not initialized, but has the label %s", n.Name, key)
		}
	}
}

func containsAddress(addresses []corev1.NodeAddress, a corev1.NodeAddress) bool {
	for _, b := range addresses {
		if b == a {
			return true
		}
	}

	return false
}

// The origins the NodeTransform gives a providerID from Talos and an InternalIP from the kubelet's provided
// node IP.
const (
	talosProviderIDOrigin = "Talos platformMetadata.providerID"
	providedIPOrigin      = "kubelet provided-node-ip annotation"
)

func malformedCases() []malformedCase {
	return []malformedCase{
		{
			// Talos always names the platform: without one, talos-ccm assumes metal, and says so.
			name:             "empty-platform-metadata",
			providerIDOrigin: "fallback: platform metal has no providerID in Talos",
			internalIPOrigin: providedIPOrigin,
			raw: func(talossim.Machine) map[talossim.Kind][]resource.Resource {
				return map[talossim.Kind][]resource.Resource{
					talossim.KindPlatformMetadata: {runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID)},
				}
			},
		},
		{
			// More tags than talos-ccm keeps: the "owner" tag the rule selects on is among those cut.
			name:             "huge-tags",
			recorded:         []string{"tags"},
			providerIDOrigin: talosProviderIDOrigin,
			internalIPOrigin: providedIPOrigin,
			machine: func(m *talossim.Machine) {
				m.Tags = map[string]string{"owner": "team a (ops)\x00\x07"}

				for i := range 5000 {
					m.Tags[fmt.Sprintf("k%05d-%s", i, strings.Repeat("x", i%300))] = strings.Repeat("v\x01", i%200)
				}
			},
		},
		{
			name: "invalid-values",
			// The instance type's control characters are dropped (the facts are cleaned), not recorded.
			recorded:         []string{"topology.kubernetes.io/region", "topology.kubernetes.io/zone", "internalDNS", "externalDNS"},
			providerIDOrigin: talosProviderIDOrigin,
			internalIPOrigin: providedIPOrigin,
			machine: func(m *talossim.Machine) {
				m.Region = "us east 1 (primary)"
				m.Zone = strings.Repeat("z", 300)
				m.InstanceType = "m5.large\x00\x07\n"
				m.InternalDNS = "not a dns name!"
				m.ExternalDNS = strings.Repeat("e", 2000) + ".example.com"
			},
		},
		{
			// A providerID is never cut: left out, it is one a cloud machine has yet to report, so the Node
			// waits for it (--provider-id-wait, 5m by default, longer than this test).
			name:     "oversized-provider-id",
			recorded: []string{"providerID"},
			pending:  "waiting for the providerID from Talos platform aws",
			machine: func(m *talossim.Machine) {
				m.ProviderID = "aws:///us-east-1a/" + strings.Repeat("i", 5000)
			},
		},
		{
			name:             "invalid-addresses",
			recorded:         []string{"0.0.0.0", "::/0", "address"},
			providerIDOrigin: talosProviderIDOrigin,
			internalIPOrigin: providedIPOrigin,
			raw: func(m talossim.Machine) map[talossim.Kind][]resource.Resource {
				return map[talossim.Kind][]resource.Resource{talossim.KindAddresses: {
					addressStatus("eth0", netip.PrefixFrom(m.NodeIPs[0], 20)),
					addressStatus("", netip.MustParsePrefix("198.51.100.7/32")),
					addressStatus("eth1", netip.Prefix{}),
					addressStatus("external", netip.MustParsePrefix("0.0.0.0/0")),
					addressStatus("external", netip.MustParsePrefix("::/0")),
					addressStatus("eth0", netip.MustParsePrefix("224.0.0.1/32")),
					addressStatus("eth0", netip.MustParsePrefix("255.255.255.255/32")),
					addressStatus("eth0", netip.MustParsePrefix("::ffff:203.0.113.9/128")),
				}}
			},
		},
		{
			// No address at all from Talos: the kubelet's node IP is the InternalIP, as its origin says.
			name:             "no-addresses",
			providerIDOrigin: talosProviderIDOrigin,
			internalIPOrigin: providedIPOrigin,
			raw: func(talossim.Machine) map[talossim.Kind][]resource.Resource {
				return map[talossim.Kind][]resource.Resource{talossim.KindAddresses: {}}
			},
		},
		{
			name:             "too-many-addresses",
			recorded:         []string{"addresses"},
			providerIDOrigin: talosProviderIDOrigin,
			internalIPOrigin: providedIPOrigin,
			machine: func(m *talossim.Machine) {
				for i := range 2000 {
					m.Addresses = append(m.Addresses, talossim.Address{
						LinkName: "eth1", Prefix: netip.PrefixFrom(netip.AddrFrom4([4]byte{198, 18, byte(i >> 8), byte(i)}), 15),
					})
				}
			},
		},
	}
}

// addressStatus is an AddressStatus as Talos serves it, for any prefix and link name, valid or not.
func addressStatus(link string, prefix netip.Prefix) resource.Resource {
	r := network.NewAddressStatus(network.NamespaceName, network.AddressID(link, prefix))

	spec := r.TypedSpec()
	spec.LinkName = link
	spec.Address = prefix
	spec.Scope = nethelpers.ScopeGlobal

	if prefix.Addr().Is4() {
		spec.Family = nethelpers.FamilyInet4
	} else {
		spec.Family = nethelpers.FamilyInet6
	}

	return r
}

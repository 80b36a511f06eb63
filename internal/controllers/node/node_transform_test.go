package node_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	nodectrl "github.com/talos-ccm/talos-ccm/internal/controllers/node"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// startTransformer runs the NodeTransform controller on an in-memory state, and checks for leaked
// goroutines once the test is over.
func startTransformer(t *testing.T) *ctest.Suite {
	t.Helper()

	// A contested claim is rechecked every 10s: an assertion that waits for the rival to take over needs
	// longer than that.
	s := ctest.New(t, ctest.WithTimeout(30*time.Second), ctest.WithAssertionTimeout(20*time.Second))
	s.Register(nodectrl.NewNodeTransformController())
	s.Start()

	return s
}

func TestNodeTransformController(t *testing.T) {
	s := startTransformer(t)

	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value = &specs.ConfigSpec{ClusterName: "c1", Source: "test"}
	s.Create(cfg)

	kn := kube.NewKubeNode(kube.NamespaceName, "w1")
	kn.TypedSpec().Value = &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.1"}, Created: timestamppb.Now(), Uninitialized: true}
	s.Create(kn)

	// Without Talos facts, the transform says what it waits for.
	ctest.AssertResource(s, "w1", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.False(nt.TypedSpec().Value.GetInitialize())
		a.Contains(nt.TypedSpec().Value.GetPending(), "Talos facts")
	})

	pm := talos.NewPlatformMetadata(talos.NamespaceName, "w1")
	pm.TypedSpec().Value = &specs.PlatformMetadataSpec{Nodename: "w1", HasPlatformMetadata: true, Platform: "hcloud", ProviderId: "hcloud://42", Zone: "fsn1-dc14"}
	s.Create(pm)

	ma := talos.NewMachineAddresses(talos.NamespaceName, "w1")
	ma.TypedSpec().Value = &specs.MachineAddressesSpec{Nodename: "w1", Addresses: []*specs.MachineAddress{{Address: "10.0.0.1/24", LinkName: "eth0", Scope: "global"}}}
	s.Create(ma)

	ctest.AssertResource(s, "w1", func(nt *node.NodeTransform, a *assert.Assertions) {
		spec := nt.TypedSpec().Value
		a.True(spec.GetInitialize(), spec.GetPending())
		a.Equal("hcloud://42", spec.GetProviderId())
		a.Equal("fsn1-dc14", spec.GetLabels()[kubekeys.LabelZone])
		a.Equal("c1", spec.GetLabels()[kubekeys.LabelClusterName])
	})

	// A changed fact and a changed config both reach the transform.
	pm.TypedSpec().Value.Zone = "nbg1-dc3"
	s.Update(pm)

	cfg.TypedSpec().Value.ClusterName = "c2"
	s.Update(cfg)

	ctest.AssertResource(s, "w1", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.Equal("nbg1-dc3", nt.TypedSpec().Value.GetLabels()[kubekeys.LabelZone])
		a.Equal("c2", nt.TypedSpec().Value.GetLabels()[kubekeys.LabelClusterName])
	})

	// The Node goes away: so does its transform.
	ctest.Destroy[*kube.KubeNode](s, "w1")
	ctest.AssertNoResource[*node.NodeTransform](s, "w1")
}

func TestNodeTransformControllerFollowsRulesAndFacts(t *testing.T) {
	s := startTransformer(t)

	rule := &specs.TransformationRule{
		Name:         "web",
		NodeSelector: []*specs.NodeSelectorTerm{{MatchExpressions: []*specs.NodeSelectorRequirement{{Key: "hostname", Operator: rules.OpRegexp, Values: []string{"^web-"}}}}},
		Labels:       map[string]string{"example.com/role-web": ""},
		Taints:       map[string]string{"example.com/zone": "{{ .Zone }}:NoSchedule"},
	}

	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value = &specs.ConfigSpec{Source: "test", Transformations: []*specs.TransformationRule{rule}}
	s.Create(cfg)

	for i, name := range []string{"web-1", "db-1"} {
		ip := fmt.Sprintf("10.0.0.%d", i+1)

		kn := kube.NewKubeNode(kube.NamespaceName, name)
		kn.TypedSpec().Value = &specs.KubeNodeSpec{ProvidedNodeIps: []string{ip}, Created: timestamppb.Now()}
		s.Create(kn)

		pm := talos.NewPlatformMetadata(talos.NamespaceName, name)
		pm.TypedSpec().Value = &specs.PlatformMetadataSpec{Nodename: name, HasPlatformMetadata: true, Platform: "metal", Hostname: name, Zone: "a"}
		s.Create(pm)

		ma := talos.NewMachineAddresses(talos.NamespaceName, name)
		ma.TypedSpec().Value = &specs.MachineAddressesSpec{Nodename: name, NodeIp: ip}
		s.Create(ma)
	}

	ctest.AssertResource(s, "web-1", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.Equal([]string{"web"}, nt.TypedSpec().Value.GetMatchedRules())
		a.Contains(nt.TypedSpec().Value.GetLabels(), "example.com/role-web")
		a.Equal([]*specs.Taint{{Key: "example.com/zone", Value: "a", Effect: "NoSchedule"}}, nt.TypedSpec().Value.GetTaints())
	})
	ctest.AssertResource(s, "db-1", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.Empty(nt.TypedSpec().Value.GetMatchedRules())
	})

	// A changed fact reaches the transform...
	pm, err := safe.StateGetByID[*talos.PlatformMetadata](s.Ctx(), s.State, "web-1")
	require.NoError(t, err)

	pm.TypedSpec().Value.Zone = "b"
	s.Update(pm)

	ctest.AssertResource(s, "web-1", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.Equal([]*specs.Taint{{Key: "example.com/zone", Value: "b", Effect: "NoSchedule"}}, nt.TypedSpec().Value.GetTaints())
	})

	// ... and so does a changed rule, on every node.
	cfg.TypedSpec().Value.Transformations[0].NodeSelector = nil
	s.Update(cfg)

	ctest.AssertResources(s, []string{"web-1", "db-1"}, func(nt *node.NodeTransform, a *assert.Assertions) {
		a.Equal([]string{"web"}, nt.TypedSpec().Value.GetMatchedRules())
	})
}

// One machine belongs to one Node: a second Node with facts of the same machine (the same SystemInformation
// UUID, for example hardware that reports one UUID for many boards, or a machine that lies) is refused
// until the first one is gone.
func TestNodeTransformControllerOneMachineOneNode(t *testing.T) {
	s := startTransformer(t)
	createConfig(s, &specs.ConfigSpec{Source: "test"})

	created := time.Now().Add(-time.Hour)

	for i, name := range []string{"first", "second"} {
		createMachineNode(s, name, fmt.Sprintf("10.0.0.%d", i+1), "same-uuid", created.Add(time.Duration(i)*time.Minute))
	}

	ctest.AssertResource(s, "first", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.True(nt.TypedSpec().Value.GetInitialize(), nt.TypedSpec().Value.GetPending())
		a.True(nt.TypedSpec().Value.GetVerified())
		a.Equal("talos://metal/10.0.0.1", nt.TypedSpec().Value.GetProviderId())
	})

	ctest.AssertResource(s, "second", func(nt *node.NodeTransform, a *assert.Assertions) {
		spec := nt.TypedSpec().Value
		a.False(spec.GetInitialize())
		a.False(spec.GetVerified())
		a.Empty(spec.GetProviderId(), "a refused Node is given no providerID")
		a.Equal("machine uuid/same-uuid is Node first's: one machine, providerID and address belong to one Node", spec.GetConflict())
	})

	// The first Node goes away: the machine is the second's now.
	ctest.Destroy[*kube.KubeNode](s, "first")

	ctest.AssertResource(s, "second", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.True(nt.TypedSpec().Value.GetInitialize(), nt.TypedSpec().Value.GetPending())
		a.Empty(nt.TypedSpec().Value.GetConflict())
	})
}

// The claims are seen one Node at a time, in any order: a younger Node decided first is given the machine,
// and when the older one, whose claim is stronger, is decided after it, the younger one is decided again
// and refused at once (not only when its own facts change), and told by whom in its NodeClaimRecheck.
func TestNodeTransformControllerDisplacedClaim(t *testing.T) {
	s := startTransformer(t)
	createConfig(s, &specs.ConfigSpec{Source: "test"})

	created := time.Now().Add(-time.Hour)

	createMachineNode(s, "younger", "10.0.0.2", "same-uuid", created.Add(time.Minute))

	ctest.AssertResource(s, "younger", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.True(nt.TypedSpec().Value.GetInitialize(), nt.TypedSpec().Value.GetPending())
	})

	createMachineNode(s, "older", "10.0.0.1", "same-uuid", created)

	ctest.AssertResource(s, "older", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.True(nt.TypedSpec().Value.GetInitialize(), nt.TypedSpec().Value.GetPending())
	})

	ctest.AssertResource(s, "younger", func(nt *node.NodeTransform, a *assert.Assertions) {
		spec := nt.TypedSpec().Value
		a.False(spec.GetInitialize())
		a.Empty(spec.GetProviderId())
		a.Equal("machine uuid/same-uuid is Node older's: one machine, providerID and address belong to one Node", spec.GetConflict())
	})

	ctest.AssertResource(s, "younger", func(r *node.NodeClaimRecheck, a *assert.Assertions) {
		a.Equal("older", r.TypedSpec().Value.GetDisplacedBy())
		a.Positive(r.TypedSpec().Value.GetRequests())
	})

	// A Node that goes away takes its recheck with it.
	ctest.Destroy[*kube.KubeNode](s, "younger")
	ctest.AssertNoResource[*node.NodeClaimRecheck](s, "younger")
}

// A kubelet may register its Node untainted and with any providerID, such as a victim's predictable
// talos://metal/<IP>. That Node's own machine does not give it, so it is in conflict and holds no claim on
// it, before and after its machine is verified: the victim's Node, younger, is initialized with its
// providerID.
func TestNodeTransformControllerSquattedProviderID(t *testing.T) {
	s := startTransformer(t)
	createConfig(s, &specs.ConfigSpec{Source: "test"})

	created := time.Now().Add(-time.Hour)

	squat := func(name, ip, providerID string) {
		kn := kube.NewKubeNode(kube.NamespaceName, name)
		kn.TypedSpec().Value = &specs.KubeNodeSpec{ProvidedNodeIps: []string{ip}, Created: timestamppb.New(created), ProviderId: providerID}
		s.Create(kn)
	}

	initializedWith := func(providerID string) func(*node.NodeTransform, *assert.Assertions) {
		return func(nt *node.NodeTransform, a *assert.Assertions) {
			spec := nt.TypedSpec().Value
			a.True(spec.GetInitialize(), spec.GetPending()+spec.GetConflict())
			a.Equal(providerID, spec.GetProviderId())
			a.Empty(spec.GetConflict())
		}
	}

	// A squatter whose machine is verified before the victim joins.
	squat("squatter", "10.0.0.2", "talos://metal/10.0.0.1")
	createMachineFacts(s, "squatter", "10.0.0.2", "u-squatter")

	ctest.AssertResource(s, "squatter", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.True(nt.TypedSpec().Value.GetVerified())
		a.Equal("talos://metal/10.0.0.2", nt.TypedSpec().Value.GetProviderId())
	})

	createMachineNode(s, "victim", "10.0.0.1", "u-victim", created.Add(time.Minute))
	ctest.AssertResource(s, "victim", initializedWith("talos://metal/10.0.0.1"))

	ctest.AssertResource(s, "squatter", func(nt *node.NodeTransform, a *assert.Assertions) {
		spec := nt.TypedSpec().Value
		a.True(spec.GetInitialize(), "it keeps what its own machine gives")
		a.Equal("the Node was registered with providerID talos://metal/10.0.0.1, its machine's is talos://metal/10.0.0.2: the Node holds no claim on it", spec.GetConflict())
	})

	// A squatter whose machine is never verified holds nothing either.
	squat("unverified", "10.0.0.4", "talos://metal/10.0.0.3")
	ctest.AssertResource(s, "unverified", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.Contains(nt.TypedSpec().Value.GetPending(), "Talos facts")
	})

	createMachineNode(s, "victim-2", "10.0.0.3", "u-victim-2", created.Add(time.Minute))
	ctest.AssertResource(s, "victim-2", initializedWith("talos://metal/10.0.0.3"))
}

// createConfig creates the active Config.
func createConfig(s *ctest.Suite, spec *specs.ConfigSpec) {
	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value = spec
	s.Create(cfg)
}

// createMachineNode creates an uninitialized KubeNode whose kubelet points at ip, and the facts of its
// metal machine, which names itself the Node.
func createMachineNode(s *ctest.Suite, name, ip, uuid string, created time.Time) {
	kn := kube.NewKubeNode(kube.NamespaceName, name)
	kn.TypedSpec().Value = &specs.KubeNodeSpec{ProvidedNodeIps: []string{ip}, Created: timestamppb.New(created), Uninitialized: true}
	s.Create(kn)

	createMachineFacts(s, name, ip, uuid)
}

// createMachineFacts creates the facts of a metal machine at ip that names itself the Node.
func createMachineFacts(s *ctest.Suite, name, ip, uuid string) {
	pm := talos.NewPlatformMetadata(talos.NamespaceName, name)
	pm.TypedSpec().Value = &specs.PlatformMetadataSpec{Nodename: name, HasPlatformMetadata: true, Platform: "metal", Uuid: uuid, NodeIp: ip}
	s.Create(pm)

	ma := talos.NewMachineAddresses(talos.NamespaceName, name)
	ma.TypedSpec().Value = &specs.MachineAddressesSpec{Nodename: name, NodeIp: ip}
	s.Create(ma)
}

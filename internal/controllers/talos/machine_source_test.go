package talos_test

import (
	"cmp"
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"

	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	talosruntime "github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	talosctrl "github.com/talos-ccm/talos-ccm/internal/controllers/talos"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// startMachineSource runs the Talos source over api, with the embedding API's defaults for the options
// opts leaves zero.
func startMachineSource(t *testing.T, api *talosAPI, opts talosctrl.MachineSourceOptions, suite ...ctest.Option) *ctest.Suite {
	t.Helper()

	defaults := ccm.DefaultOptions()
	opts.CallTimeout = cmp.Or(opts.CallTimeout, defaults.TalosTimeout)
	opts.RetryMax = cmp.Or(opts.RetryMax, defaults.TalosSource.RetryMax)
	opts.PlatformRefresh = cmp.Or(opts.PlatformRefresh, defaults.TalosSource.PlatformRefresh)
	opts.ProbeInterval = cmp.Or(opts.ProbeInterval, defaults.TalosSource.ProbeInterval)

	s := ctest.New(t, suite...)
	s.Register(&talosctrl.MachineSourceController{Talos: api.conn(t), Options: opts})
	s.Start()
	s.Create(activeConfig())

	return s
}

func activeConfig() *config.Config {
	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value = &specs.ConfigSpec{ClusterName: "c1", Source: "test"}

	return cfg
}

func kubeNode(name, ip string, ready bool, labels map[string]string) *kube.KubeNode {
	kn := kube.NewKubeNode(kube.NamespaceName, name)
	kn.TypedSpec().Value = &specs.KubeNodeSpec{ProvidedNodeIps: []string{ip}, Created: timestamppb.Now(), Ready: ready, Labels: labels}

	return kn
}

func simMachine(name, ip string) talossim.Machine {
	return talossim.Machine{
		Name: name, Platform: "hcloud", Zone: "fsn1-dc14", ProviderID: "hcloud://42",
		Addresses: []talossim.Address{{LinkName: "eth0", Prefix: netip.MustParsePrefix(ip + "/24")}},
		System:    talossim.SystemInfo{UUID: "uuid-" + name},
	}
}

func addressList(ma *talos.MachineAddresses) []string {
	var out []string
	for _, a := range ma.TypedSpec().Value.GetAddresses() {
		out = append(out, a.GetAddress())
	}

	return out
}

// TestMachineSourceMirrorsTheNodesMachine checks that the machine that names itself a Node has its facts
// filed under the Node, kept current by its address watch (which a new address set makes read
// PlatformMetadata again), and forgotten with the Node.
func TestMachineSourceMirrorsTheNodesMachine(t *testing.T) {
	api := newTalosAPI()
	machine := api.add(t, "10.0.0.5", simMachine("w1", "10.0.0.5"))

	s := startMachineSource(t, api, talosctrl.MachineSourceOptions{})
	s.Create(kubeNode("w1", "10.0.0.5", true, nil))

	ctest.AssertResource(s, "w1", func(pm *talos.PlatformMetadata, a *assert.Assertions) {
		spec := pm.TypedSpec().Value
		a.Equal("w1", spec.GetNodename())
		a.Equal("hcloud://42", spec.GetProviderId())
		a.Equal("uuid-w1", spec.GetUuid())
		a.Equal("10.0.0.5", spec.GetNodeIp())
	})
	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		spec := ms.TypedSpec().Value
		a.True(spec.GetReachable())
		a.Equal("w1", spec.GetNodename())
		a.True(spec.GetNodenameRead())
		a.Equal("uuid-w1", spec.GetMachineUuid())
		a.Empty(spec.GetStage(), "the stage is read only for NotReady Nodes")
	})
	ctest.AssertResource(s, "w1", func(ma *talos.MachineAddresses, a *assert.Assertions) {
		a.Equal([]string{"10.0.0.5/24"}, addressList(ma))
	})

	// The machine moves to another zone, where it gets a new address: both reach the facts, the address
	// through the watch, the zone because the address set changed.
	modifyMachine(t, machine, talosruntime.NewPlatformMetadataSpec(talosruntime.NamespaceName, talosruntime.PlatformMetadataID), func(r *talosruntime.PlatformMetadata) error {
		r.TypedSpec().Zone = "nbg1-dc3"

		return nil
	})

	added := netip.MustParsePrefix("10.0.1.5/24")
	modifyMachine(t, machine, network.NewAddressStatus(network.NamespaceName, network.AddressID("eth1", added)), func(r *network.AddressStatus) error {
		r.TypedSpec().Address = added
		r.TypedSpec().LinkName = "eth1"
		r.TypedSpec().Family = nethelpers.FamilyInet4
		r.TypedSpec().Scope = nethelpers.ScopeGlobal

		return nil
	})

	ctest.AssertResource(s, "w1", func(ma *talos.MachineAddresses, a *assert.Assertions) {
		a.Equal([]string{"10.0.0.5/24", "10.0.1.5/24"}, addressList(ma))
	})
	ctest.AssertResource(s, "w1", func(pm *talos.PlatformMetadata, a *assert.Assertions) {
		a.Equal("nbg1-dc3", pm.TypedSpec().Value.GetZone())
		a.Equal("uuid-w1", pm.TypedSpec().Value.GetUuid(), "SystemInformation kept")
	})

	// The Node goes away: so do its facts.
	ctest.Destroy[*kube.KubeNode](s, "w1")
	ctest.AssertNoResource[*talos.PlatformMetadata](s, "w1")
	ctest.AssertNoResource[*talos.MachineAddresses](s, "w1")
	ctest.AssertNoResource[*talos.MachineStatus](s, "w1")
}

// nodeLists is a state that counts the lists of KubeNodes.
type nodeLists struct {
	state.CoreState

	lists atomic.Int64
}

func (s *nodeLists) List(ctx context.Context, kind resource.Kind, opts ...state.ListOption) (resource.List, error) {
	if kind.Type() == kube.KubeNodeType {
		s.lists.Add(1)
	}

	return s.CoreState.List(ctx, kind, opts...)
}

// TestMachineSourceReadsOnlyTheNodesThatChanged checks that, once the sessions run, a Node that joins,
// changes or leaves starts, tells or stops its session without a read of every Node (thousands of joining
// Nodes made every pass read them all), and that a change of the config, which picks the IP each machine is
// asked through, does read them all.
func TestMachineSourceReadsOnlyTheNodesThatChanged(t *testing.T) {
	api := newTalosAPI()
	for _, name := range []string{"w1", "w2", "w3"} {
		ip := "10.0.0." + name[1:]
		api.add(t, ip, simMachine(name, ip))
	}

	st := &nodeLists{CoreState: namespaced.NewState(cosistate.MemoryStateBuilder())}
	s := startMachineSource(t, api, talosctrl.MachineSourceOptions{ProbeInterval: time.Second}, ctest.WithState(state.WrapCore(st)))

	for _, name := range []string{"w1", "w2"} {
		s.Create(kubeNode(name, "10.0.0."+name[1:], true, nil))
		ctest.AssertResource(s, name, func(*talos.MachineAddresses, *assert.Assertions) {})
	}

	listed := st.lists.Load()

	// A Node joins, one turns NotReady (its session reads the machine's stage), one leaves.
	s.Create(kubeNode("w3", "10.0.0.3", true, nil))
	ctest.Modify(s, kube.NewKubeNode(kube.NamespaceName, "w1"), func(n *kube.KubeNode) error {
		n.TypedSpec().Value.Ready = false

		return nil
	})
	ctest.Destroy[*kube.KubeNode](s, "w2")

	ctest.AssertResource(s, "w3", func(*talos.MachineAddresses, *assert.Assertions) {})
	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.NotEmpty(ms.TypedSpec().Value.GetStage(), "the stage of a NotReady Node's machine")
	})
	ctest.AssertNoResource[*talos.MachineAddresses](s, "w2")
	assert.Equal(t, listed, st.lists.Load(), "Nodes listed after the sessions ran")

	ctest.Modify(s, activeConfig(), func(c *config.Config) error {
		c.TypedSpec().Value.PreferIpv6 = true

		return nil
	})
	assert.Eventually(t, func() bool { return st.lists.Load() > listed }, 10*time.Second, 50*time.Millisecond,
		"a changed config makes a pass over every Node")
}

// TestMachineSourceFilesNothingFromAnotherMachine checks the identity binding: a machine that names itself
// another node gives the Node nothing but a MachineStatus that says so, and is asked again until it names
// the Node.
func TestMachineSourceFilesNothingFromAnotherMachine(t *testing.T) {
	api := newTalosAPI()
	machine := api.add(t, "10.0.0.6", simMachine("w3", "10.0.0.6"))

	s := startMachineSource(t, api, talosctrl.MachineSourceOptions{RetryMax: time.Second})
	s.Create(kubeNode("w2", "10.0.0.6", true, nil))

	ctest.AssertResource(s, "w2", func(ms *talos.MachineStatus, a *assert.Assertions) {
		spec := ms.TypedSpec().Value
		a.True(spec.GetReachable())
		a.Equal("w3", spec.GetNodename())
		a.True(spec.GetNodenameRead())
		a.Contains(spec.GetLastError(), "w3")
		a.Empty(spec.GetMachineUuid())
	})
	ctest.AssertNoResource[*talos.PlatformMetadata](s, "w2")
	ctest.AssertNoResource[*talos.MachineAddresses](s, "w2")

	// The machine names itself the Node: its facts are filed at the next retry.
	modifyMachine(t, machine, k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID), func(r *k8s.Nodename) error {
		r.TypedSpec().Nodename = "w2"

		return nil
	})

	ctest.AssertResource(s, "w2", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.Equal("w2", ms.TypedSpec().Value.GetNodename())
		a.Empty(ms.TypedSpec().Value.GetLastError())
	})
	ctest.AssertResource(s, "w2", func(pm *talos.PlatformMetadata, a *assert.Assertions) {
		a.Equal("uuid-w3", pm.TypedSpec().Value.GetUuid())
	})
}

// TestMachineSourceReportsUnreachableMachine checks that a machine that does not answer is reported
// unreachable, and its facts filed once it answers.
func TestMachineSourceReportsUnreachableMachine(t *testing.T) {
	api := newTalosAPI()

	s := startMachineSource(t, api, talosctrl.MachineSourceOptions{RetryMax: time.Second})
	s.Create(kubeNode("w1", "10.0.0.5", true, nil))

	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.False(ms.TypedSpec().Value.GetReachable())
		a.Contains(ms.TypedSpec().Value.GetLastError(), "connection refused")
		a.Equal("10.0.0.5", ms.TypedSpec().Value.GetNodeIp())
	})

	api.add(t, "10.0.0.5", simMachine("w1", "10.0.0.5"))

	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.True(ms.TypedSpec().Value.GetReachable())
		a.Empty(ms.TypedSpec().Value.GetLastError())
	})
}

// TestMachineSourceFollowsNewIP checks that a Node whose IP changed has its machine read again at the new
// one.
func TestMachineSourceFollowsNewIP(t *testing.T) {
	api := newTalosAPI()
	api.add(t, "10.0.0.5", simMachine("w1", "10.0.0.5"))

	s := startMachineSource(t, api, talosctrl.MachineSourceOptions{})
	s.Create(kubeNode("w1", "10.0.0.5", true, nil))

	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.True(ms.TypedSpec().Value.GetReachable())
		a.Equal("10.0.0.5", ms.TypedSpec().Value.GetNodeIp())
	})

	api.add(t, "10.0.0.7", simMachine("w1", "10.0.0.7"))
	ctest.Modify(s, kube.NewKubeNode(kube.NamespaceName, "w1"), func(kn *kube.KubeNode) error {
		kn.TypedSpec().Value.ProvidedNodeIps = []string{"10.0.0.7"}

		return nil
	})

	ctest.AssertResource(s, "w1", func(ma *talos.MachineAddresses, a *assert.Assertions) {
		a.Equal("10.0.0.7", ma.TypedSpec().Value.GetNodeIp())
		a.Equal([]string{"10.0.0.7/24"}, addressList(ma))
	})
	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.True(ms.TypedSpec().Value.GetReachable())
		a.Equal("10.0.0.7", ms.TypedSpec().Value.GetNodeIp())
	})
}

// TestMachineSourceProbesNotReadyNode checks that the machine of a NotReady Node is asked for its stage,
// which no watch follows, and that the stage is dropped once the Node is Ready again.
func TestMachineSourceProbesNotReadyNode(t *testing.T) {
	api := newTalosAPI()
	machine := api.add(t, "10.0.0.5", simMachine("w1", "10.0.0.5"))

	s := startMachineSource(t, api, talosctrl.MachineSourceOptions{ProbeInterval: 50 * time.Millisecond})
	s.Create(kubeNode("w1", "10.0.0.5", true, nil))

	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.True(ms.TypedSpec().Value.GetReachable())
		a.Empty(ms.TypedSpec().Value.GetStage())
	})

	modifyMachine(t, machine, talosruntime.NewMachineStatus(), func(r *talosruntime.MachineStatus) error {
		r.TypedSpec().Stage = talosruntime.MachineStageShuttingDown

		return nil
	})
	ctest.Modify(s, kube.NewKubeNode(kube.NamespaceName, "w1"), func(kn *kube.KubeNode) error {
		kn.TypedSpec().Value.Ready = false

		return nil
	})

	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.Equal(talosruntime.MachineStageShuttingDown.String(), ms.TypedSpec().Value.GetStage())
		a.True(ms.TypedSpec().Value.GetReachable())
	})

	// Ready again: the stage of the NotReady time goes; NotReady again: it is read again.
	ctest.Modify(s, kube.NewKubeNode(kube.NamespaceName, "w1"), func(kn *kube.KubeNode) error {
		kn.TypedSpec().Value.Ready = true

		return nil
	})
	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.Empty(ms.TypedSpec().Value.GetStage())
		a.True(ms.TypedSpec().Value.GetReachable())
	})
	ctest.Modify(s, kube.NewKubeNode(kube.NamespaceName, "w1"), func(kn *kube.KubeNode) error {
		kn.TypedSpec().Value.Ready = false

		return nil
	})
	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.Equal(talosruntime.MachineStageShuttingDown.String(), ms.TypedSpec().Value.GetStage())
	})

	// The machine stops answering while its Node is NotReady: the next probe says so.
	api.mu.Lock()
	delete(api.machines, "10.0.0.5")
	api.mu.Unlock()

	ctest.AssertResource(s, "w1", func(ms *talos.MachineStatus, a *assert.Assertions) {
		a.False(ms.TypedSpec().Value.GetReachable())
		a.Equal(talosruntime.MachineStageShuttingDown.String(), ms.TypedSpec().Value.GetStage(), "the last known stage is kept")
	})
}

// TestMachineSourceWaitsForLateProviderID checks that the machine of an uninitialized Node, on a platform
// that gives a providerID, is read again until Talos reports it.
func TestMachineSourceWaitsForLateProviderID(t *testing.T) {
	api := newTalosAPI()

	late := simMachine("w1", "10.0.0.5")
	late.Platform, late.ProviderID = "aws", ""
	machine := api.add(t, "10.0.0.5", late)

	s := startMachineSource(t, api, talosctrl.MachineSourceOptions{PlatformRefresh: 50 * time.Millisecond})

	node := kubeNode("w1", "10.0.0.5", true, nil)
	node.TypedSpec().Value.Uninitialized = true
	s.Create(node)

	ctest.AssertResource(s, "w1", func(pm *talos.PlatformMetadata, a *assert.Assertions) {
		a.Equal("aws", pm.TypedSpec().Value.GetPlatform())
		a.Empty(pm.TypedSpec().Value.GetProviderId())
	})

	modifyMachine(t, machine, talosruntime.NewPlatformMetadataSpec(talosruntime.NamespaceName, talosruntime.PlatformMetadataID), func(r *talosruntime.PlatformMetadata) error {
		r.TypedSpec().ProviderID = "aws:///us-east-1a/i-1"

		return nil
	})

	// The re-read replaces the facts of PlatformMetadata only: those of SystemInformation and the Node's
	// name, which the session keeps no copy of, stay as stored.
	ctest.AssertResource(s, "w1", func(pm *talos.PlatformMetadata, a *assert.Assertions) {
		a.Equal("aws:///us-east-1a/i-1", pm.TypedSpec().Value.GetProviderId())
		a.Equal("uuid-w1", pm.TypedSpec().Value.GetUuid())
		a.True(pm.TypedSpec().Value.GetHasSystemInformation())
		a.Equal("w1", pm.TypedSpec().Value.GetNodename())
		a.Equal("10.0.0.5", pm.TypedSpec().Value.GetNodeIp())
	})
}

package talossim_test

import (
	"net/netip"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

func TestResources(t *testing.T) {
	t.Parallel()

	byPointer := func(res []resource.Resource) map[string]resource.Resource {
		m := map[string]resource.Resource{}
		for _, r := range res {
			m[r.Metadata().Namespace()+"/"+r.Metadata().Type()+"/"+r.Metadata().ID()] = r
		}

		return m
	}

	machines := testMachines()
	aws, gcp, metal := byPointer(machines[0].Resources()), byPointer(machines[1].Resources()), byPointer(machines[2].Resources())

	for _, tc := range []struct {
		name    string
		res     map[string]resource.Resource
		pointer string
		present bool
	}{
		{"platform metadata", aws, "runtime/PlatformMetadatas.talos.dev/platformmetadata", true},
		{"no platform metadata on metal", metal, "runtime/PlatformMetadatas.talos.dev/platformmetadata", false},
		{"system information", aws, "hardware/SystemInformations.hardware.talos.dev/systeminformation", true},
		{"no system information without uuid", gcp, "hardware/SystemInformations.hardware.talos.dev/systeminformation", false},
		{"machine status", metal, "runtime/MachineStatuses.runtime.talos.dev/machine", true},
		{"hostname", gcp, "network/HostnameStatuses.net.talos.dev/hostname", true},
		{"controller manager config", aws, "controlplane/ControllerManagerConfigs.kubernetes.talos.dev/kube-controller-manager", true},
		{"no controller manager config on workers", gcp, "controlplane/ControllerManagerConfigs.kubernetes.talos.dev/kube-controller-manager", false},
		{"ipv4 address", aws, "network/AddressStatuses.net.talos.dev/ens5/10.0.0.10/20", true},
		{"ipv6 address", aws, "network/AddressStatuses.net.talos.dev/ens5/2001:db8:0:1::10/64", true},
		{"loopback", aws, "network/AddressStatuses.net.talos.dev/lo/127.0.0.1/8", true},
	} {
		_, ok := tc.res[tc.pointer]
		assert.Equal(t, tc.present, ok, tc.name)
	}

	// Every resource survives the protobuf encoding the gRPC server applies.
	for _, r := range machines[0].Resources() {
		pr, err := protobuf.FromResource(r)
		require.NoError(t, err, r.Metadata().String())

		_, err = pr.Marshal()
		require.NoError(t, err, r.Metadata().String())
	}

	// A control-plane machine is "controlplane", the others "worker".
	for res, want := range map[*map[string]resource.Resource]machine.Type{&aws: machine.TypeControlPlane, &gcp: machine.TypeWorker} {
		mt, ok := (*res)["config/MachineTypes.config.talos.dev/machine-type"].(*config.MachineType)
		require.True(t, ok)
		assert.Equal(t, want, mt.MachineType())
	}

	hostname, ok := gcp["network/HostnameStatuses.net.talos.dev/hostname"].(*network.HostnameStatus)
	require.True(t, ok)
	assert.Equal(t, "gcp-0001", hostname.TypedSpec().Hostname)
	assert.Equal(t, "example.net", hostname.TypedSpec().Domainname)

	pm, ok := aws["runtime/PlatformMetadatas.talos.dev/platformmetadata"].(*runtime.PlatformMetadata)
	require.True(t, ok)
	assert.Equal(t, "aws", pm.TypedSpec().Platform)
	assert.Equal(t, "i-0123456789abcdef0", pm.TypedSpec().InstanceID)

	si, ok := aws["hardware/SystemInformations.hardware.talos.dev/systeminformation"].(*hardware.SystemInformation)
	require.True(t, ok)
	assert.Equal(t, "Amazon EC2", si.TypedSpec().Manufacturer)

	cm, ok := aws["controlplane/ControllerManagerConfigs.kubernetes.talos.dev/kube-controller-manager"].(*k8s.ControllerManagerConfig)
	require.True(t, ok)
	assert.Equal(t, []string{talossim.ServiceCIDRv4, talossim.ServiceCIDRv6}, cm.TypedSpec().ServiceCIDRs)
}

func TestAddressStatus(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		addr      talossim.Address
		family    nethelpers.Family
		scope     nethelpers.Scope
		linkIndex uint32
		broadcast string
	}{
		{
			addr:   talossim.Address{LinkName: "lo", Prefix: netip.MustParsePrefix("127.0.0.1/8"), Scope: "host"},
			family: nethelpers.FamilyInet4, scope: nethelpers.ScopeHost, linkIndex: 1,
		},
		{
			addr:   talossim.Address{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.0.1.7/24")},
			family: nethelpers.FamilyInet4, scope: nethelpers.ScopeGlobal, linkIndex: 2, broadcast: "10.0.1.255",
		},
		{
			addr:   talossim.Address{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.0.17.7/20")},
			family: nethelpers.FamilyInet4, scope: nethelpers.ScopeGlobal, linkIndex: 2, broadcast: "10.0.31.255",
		},
		{
			addr:   talossim.Address{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.16.0.7/32")},
			family: nethelpers.FamilyInet4, scope: nethelpers.ScopeGlobal, linkIndex: 2,
		},
		{
			addr:   talossim.Address{LinkName: "eth0", Prefix: netip.MustParsePrefix("fe80::1/64"), Scope: "link"},
			family: nethelpers.FamilyInet6, scope: nethelpers.ScopeLink, linkIndex: 2,
		},
		{
			addr:   talossim.Address{LinkName: "kubespan", Prefix: netip.MustParsePrefix("fd00:1::5/64"), Scope: "global"},
			family: nethelpers.FamilyInet6, scope: nethelpers.ScopeGlobal, linkIndex: 3,
		},
	} {
		m := talossim.Machine{
			Name: "m", Platform: "metal",
			Addresses: []talossim.Address{
				{LinkName: "eth0", Prefix: netip.MustParsePrefix("192.168.0.1/24")},
				{LinkName: "kubespan", Prefix: netip.MustParsePrefix("fd00:1::1/64")},
				tc.addr,
			},
		}

		var found *network.AddressStatus

		for _, r := range m.Resources() {
			if r.Metadata().ID() == network.AddressID(tc.addr.LinkName, tc.addr.Prefix) {
				found, _ = r.(*network.AddressStatus)
			}
		}

		require.NotNil(t, found, tc.addr.Prefix.String())

		spec := found.TypedSpec()
		assert.Equal(t, tc.addr.Prefix, spec.Address)
		assert.Equal(t, tc.addr.LinkName, spec.LinkName)
		assert.Equal(t, tc.family, spec.Family, tc.addr.Prefix.String())
		assert.Equal(t, tc.scope, spec.Scope, tc.addr.Prefix.String())
		assert.Equal(t, tc.linkIndex, spec.LinkIndex, tc.addr.Prefix.String())

		if tc.broadcast == "" {
			assert.False(t, spec.Broadcast.IsValid(), tc.addr.Prefix.String())
		} else {
			assert.Equal(t, tc.broadcast, spec.Broadcast.String(), tc.addr.Prefix.String())
		}
	}
}

// TestMachineTypeKnobs checks the fleet format's machineType and noMachineType.
func TestMachineTypeKnobs(t *testing.T) {
	t.Parallel()

	served := func(m talossim.Machine) *config.MachineType {
		for _, r := range m.Resources() {
			if mt, ok := r.(*config.MachineType); ok {
				return mt
			}
		}

		return nil
	}

	m := talossim.Machine{Name: "w-1", Platform: "metal"}
	assert.Equal(t, machine.TypeWorker, served(m).MachineType())

	m.MachineType = "init"
	require.NoError(t, m.Validate())
	assert.Equal(t, machine.TypeInit, served(m).MachineType())

	m.NoMachineType = true
	assert.Nil(t, served(m))

	m.MachineType = "join"
	require.ErrorContains(t, m.Validate(), `machine type "join" is not one of`)
}

// TestNodeIPConfig checks the node IP exclusions a machine serves: the pod and service ranges of its
// families and its config's shared virtual IPs.
func TestNodeIPConfig(t *testing.T) {
	t.Parallel()

	m := talossim.Machine{
		Name: "cp-1", Platform: "metal",
		NodeIPs:    []netip.Addr{netip.MustParseAddr("10.0.0.5"), netip.MustParseAddr("2001:db8::5")},
		VirtualIPs: []netip.Addr{netip.MustParseAddr("10.0.0.100")},
	}
	require.NoError(t, m.Validate())

	var cfg *k8s.NodeIPConfig

	for _, r := range m.Resources() {
		if c, ok := r.(*k8s.NodeIPConfig); ok {
			cfg = c
		}
	}

	require.NotNil(t, cfg)
	assert.Equal(t, k8s.KubeletID, cfg.Metadata().ID())
	assert.Equal(t, []string{talossim.PodCIDRv4, talossim.ServiceCIDRv4, talossim.PodCIDRv6, talossim.ServiceCIDRv6, "10.0.0.100"}, cfg.TypedSpec().ExcludeSubnets)
}

package talos

import (
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	talosconfig "github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	talosruntime "github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// TestTalosResourcesAreMachinerys checks the names the sources read resources by against machinery's own
// resources: a name spelled wrong would read nothing, and say nothing.
func TestTalosResourcesAreMachinerys(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		ours talosResource
		want *resource.Metadata
	}{
		{nodenameResource, k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID).Metadata()},
		{nodeIPConfigResource, k8s.NewNodeIPConfig(k8s.NamespaceName, k8s.KubeletID).Metadata()},
		{platformResource, talosruntime.NewPlatformMetadataSpec(talosruntime.NamespaceName, talosruntime.PlatformMetadataID).Metadata()},
		{machineStatusResource, talosruntime.NewMachineStatus().Metadata()},
		{systemInfoResource, hardware.NewSystemInformation(hardware.SystemInformationID).Metadata()},
		{machineTypeResource, talosconfig.NewMachineType().Metadata()},
		{controllerManagerCfg, k8s.NewControllerManagerConfig().Metadata()},
		{addressStatusKind, network.NewAddressStatus(network.NamespaceName, "").Metadata()},
	} {
		assert.Equal(t, talosResource{namespace: tc.want.Namespace(), typ: tc.want.Type(), id: tc.want.ID()}, tc.ours)
	}
}

// TestTalosNamesAreMachinerys checks that the facts name stages, scopes, families, address flags and machine
// types as machinery prints them, for every value: the facts are what they were when the machinery's
// resources decoded them.
func TestTalosNamesAreMachinerys(t *testing.T) {
	t.Parallel()

	for v := range 256 {
		assert.Equal(t, nethelpers.Scope(v).String(), scopeText(uint8(v)), "scope %d", v)
		assert.Equal(t, nethelpers.Family(v).String(), familyText(uint8(v)), "family %d", v)
	}

	for v := range int32(12) {
		assert.Equal(t, talosruntime.MachineStage(v).String(), stageText(v), "stage %d", v)
	}

	for bit := range 32 {
		flags := nethelpers.AddressFlags(1<<bit | 1<<7)
		assert.Equal(t, machineryFlagNames(flags), addressFlagList(uint32(flags)), "flags %b", uint32(flags))
	}

	for v := range machine.Type(6) {
		want := ""

		switch {
		case v.IsControlPlane():
			want = rules.MachineTypeControlPlane
		case v == machine.TypeWorker:
			want = rules.MachineTypeWorker
		}

		assert.Equal(t, want, machineTypeFact(int32(v)), "machine type %s", v)
	}
}

// machineryFlagNames lists flags as machinery prints them.
func machineryFlagNames(flags nethelpers.AddressFlags) []string {
	if flags.String() == "" {
		return nil
	}

	return strings.Split(flags.String(), ",")
}

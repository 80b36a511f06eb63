package talossim

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/config"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
)

// Kind names a group of resources that a fault knob can remove from a machine.
type Kind string

// Kinds of resources served per machine.
const (
	KindPlatformMetadata        Kind = "platformmetadata"
	KindSystemInformation       Kind = "systeminformation"
	KindAddresses               Kind = "addresses"
	KindMachineStatus           Kind = "machinestatus"
	KindHostname                Kind = "hostname"
	KindControllerManagerConfig Kind = "controllermanagerconfig"
	KindNodename                Kind = "nodename"
	KindMachineType             Kind = "machinetype"
	KindNodeIPConfig            Kind = "nodeipconfig"
)

// Kinds lists every Kind, in the order Resources returns them.
var Kinds = []Kind{
	KindPlatformMetadata, KindSystemInformation, KindAddresses, KindMachineStatus, KindHostname, KindControllerManagerConfig, KindNodename,
	KindMachineType, KindNodeIPConfig,
}

// ParseKind parses a Kind name.
func ParseKind(s string) (Kind, error) {
	if !slices.Contains(Kinds, Kind(s)) {
		return "", fmt.Errorf("unknown resource kind %q (valid: %q)", s, Kinds)
	}

	return Kind(s), nil
}

// kindTypes maps each Kind to the resource kind (namespace and type) its resources have.
var kindTypes = map[Kind]resource.Kind{
	KindPlatformMetadata:        resource.NewMetadata(runtime.NamespaceName, runtime.PlatformMetadataType, "", resource.VersionUndefined),
	KindSystemInformation:       resource.NewMetadata(hardware.NamespaceName, hardware.SystemInformationType, "", resource.VersionUndefined),
	KindAddresses:               resource.NewMetadata(network.NamespaceName, network.AddressStatusType, "", resource.VersionUndefined),
	KindMachineStatus:           resource.NewMetadata(runtime.NamespaceName, runtime.MachineStatusType, "", resource.VersionUndefined),
	KindHostname:                resource.NewMetadata(network.NamespaceName, network.HostnameStatusType, "", resource.VersionUndefined),
	KindControllerManagerConfig: resource.NewMetadata(k8s.ControlPlaneNamespaceName, k8s.ControllerManagerConfigType, "", resource.VersionUndefined),
	KindNodename:                resource.NewMetadata(k8s.NamespaceName, k8s.NodenameType, "", resource.VersionUndefined),
	KindMachineType:             resource.NewMetadata(config.NamespaceName, config.MachineTypeType, "", resource.VersionUndefined),
	KindNodeIPConfig:            resource.NewMetadata(k8s.NamespaceName, k8s.NodeIPConfigType, "", resource.VersionUndefined),
}

// Default Kubernetes networks that control-plane machines report in ControllerManagerConfig.
const (
	PodCIDRv4     = "10.244.0.0/16"
	PodCIDRv6     = "fd00:10:244::/56"
	ServiceCIDRv4 = "10.96.0.0/12"
	ServiceCIDRv6 = "fd00:10:96::/112"
)

// Resources builds the Talos resources the machine serves, as machinery typed resources.
//
// The machine must be valid (Validate); invalid scopes or stages fall back to defaults.
func (m Machine) Resources() []resource.Resource {
	res := make([]resource.Resource, 0, len(m.Addresses)+5)

	for _, kind := range Kinds {
		res = append(res, m.resourcesOf(kind)...)
	}

	return res
}

// resourcesOf builds the resources of one kind.
func (m Machine) resourcesOf(kind Kind) []resource.Resource {
	switch kind {
	case KindPlatformMetadata:
		if m.NoPlatformMetadata {
			return nil
		}

		return []resource.Resource{m.platformMetadata()}
	case KindSystemInformation:
		if m.System.UUID == "" {
			return nil
		}

		return []resource.Resource{m.systemInformation()}
	case KindAddresses:
		return m.addressStatuses()
	case KindMachineStatus:
		return []resource.Resource{m.machineStatus()}
	case KindHostname:
		return []resource.Resource{m.hostnameStatus()}
	case KindControllerManagerConfig:
		if !m.ControlPlane {
			return nil
		}

		return []resource.Resource{m.controllerManagerConfig()}
	case KindNodename:
		if m.NoNodename {
			return nil
		}

		return []resource.Resource{m.nodename()}
	case KindMachineType:
		if m.NoMachineType {
			return nil
		}

		return []resource.Resource{m.machineType()}
	case KindNodeIPConfig:
		return []resource.Resource{m.nodeIPConfig()}
	}

	return nil
}

func (m Machine) platformMetadata() *runtime.PlatformMetadata {
	r := runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID)

	*r.TypedSpec() = runtime.PlatformMetadataSpec{
		Platform:     m.Platform,
		Hostname:     m.Hostname(),
		Region:       m.Region,
		Zone:         m.Zone,
		InstanceType: m.InstanceType,
		InstanceID:   m.InstanceID,
		ProviderID:   m.ProviderID,
		Spot:         m.Spot,
		InternalDNS:  m.InternalDNS,
		ExternalDNS:  m.ExternalDNS,
		Tags:         m.Tags,
	}

	if m.NoPlatformHostname {
		r.TypedSpec().Hostname = ""
	}

	return r
}

func (m Machine) systemInformation() *hardware.SystemInformation {
	r := hardware.NewSystemInformation(hardware.SystemInformationID)

	*r.TypedSpec() = hardware.SystemInformationSpec{
		Manufacturer: m.System.Manufacturer,
		ProductName:  m.System.ProductName,
		Version:      m.System.Version,
		SerialNumber: m.System.SerialNumber,
		UUID:         m.System.UUID,
		WakeUpType:   m.System.WakeUpType,
		SKUNumber:    m.System.SKUNumber,
	}

	return r
}

func (m Machine) machineStatus() *runtime.MachineStatus {
	r := runtime.NewMachineStatus()

	stage, err := m.MachineStage()
	if err != nil {
		stage = runtime.MachineStageUnknown
	}

	r.TypedSpec().Stage = stage
	r.TypedSpec().Status.Ready = stage == runtime.MachineStageRunning

	if !r.TypedSpec().Status.Ready {
		r.TypedSpec().Status.UnmetConditions = []runtime.UnmetCondition{
			{Name: "stage", Reason: "machine is " + stage.String()},
		}
	}

	return r
}

func (m Machine) hostnameStatus() *network.HostnameStatus {
	r := network.NewHostnameStatus(network.NamespaceName, network.HostnameID)

	r.TypedSpec().Hostname = m.Name
	r.TypedSpec().Domainname = m.Domain

	return r
}

// nodename is the Kubernetes node name the machine says it is (what its kubelet registers as): the
// machine's Name unless a fault knob makes it claim another one.
func (m Machine) nodename() *k8s.Nodename {
	r := k8s.NewNodename(k8s.NamespaceName, k8s.NodenameID)

	r.TypedSpec().Nodename = m.Name
	if m.Nodename != "" {
		r.TypedSpec().Nodename = m.Nodename
	}

	r.TypedSpec().HostnameVersion = "1"

	return r
}

// machineType is the machine's MachineType, as Talos publishes it for anyone with os:reader.
func (m Machine) machineType() *config.MachineType {
	r := config.NewMachineType()

	typ, err := m.TalosMachineType()
	if err != nil {
		typ = machine.TypeUnknown
	}

	r.SetMachineType(typ)

	return r
}

// nodeIPConfig is the kubelet's node IP configuration as Talos derives it from the machine config: the
// pod and service ranges and the shared virtual IPs are never the kubelet's node IP.
func (m Machine) nodeIPConfig() *k8s.NodeIPConfig {
	r := k8s.NewNodeIPConfig(k8s.NamespaceName, k8s.KubeletID)

	spec := r.TypedSpec()
	spec.ValidSubnets = []string{"0.0.0.0/0"}
	spec.ExcludeSubnets = []string{PodCIDRv4, ServiceCIDRv4}

	if m.DualStack() {
		spec.ValidSubnets = append(spec.ValidSubnets, "::/0")
		spec.ExcludeSubnets = append(spec.ExcludeSubnets, PodCIDRv6, ServiceCIDRv6)
	}

	for _, ip := range m.VirtualIPs {
		spec.ExcludeSubnets = append(spec.ExcludeSubnets, ip.String())
	}

	return r
}

func (m Machine) controllerManagerConfig() *k8s.ControllerManagerConfig {
	r := k8s.NewControllerManagerConfig()

	spec := r.TypedSpec()
	spec.Enabled = true
	spec.Image = "registry.k8s.io/kube-controller-manager:v1.36.3"
	spec.CloudProvider = "external"
	spec.PodCIDRs = []string{PodCIDRv4}
	spec.ServiceCIDRs = []string{ServiceCIDRv4}

	if m.DualStack() {
		spec.PodCIDRs = append(spec.PodCIDRs, PodCIDRv6)
		spec.ServiceCIDRs = append(spec.ServiceCIDRs, ServiceCIDRv6)
	}

	return r
}

// addressStatuses builds one AddressStatus per address, with the ID Talos uses (`<link>/<prefix>`).
func (m Machine) addressStatuses() []resource.Resource {
	res := make([]resource.Resource, 0, len(m.Addresses))
	linkIndex := linkIndexes(m.Addresses)

	for _, addr := range m.Addresses {
		r := network.NewAddressStatus(network.NamespaceName, network.AddressID(addr.LinkName, addr.Prefix))

		scope, err := addr.scope()
		if err != nil {
			scope = nethelpers.ScopeGlobal
		}

		spec := r.TypedSpec()
		spec.Address = addr.Prefix
		spec.LinkName = addr.LinkName
		spec.LinkIndex = linkIndex[addr.LinkName]
		spec.Scope = scope
		spec.Flags = nethelpers.AddressFlags(nethelpers.AddressPermanent)

		// Validate refused flags that do not parse.
		if flags, err := nethelpers.AddressFlagsString(addr.Flags); addr.Flags != "" && err == nil {
			spec.Flags = flags
		}

		if addr.Prefix.Addr().Is4() {
			spec.Family = nethelpers.FamilyInet4
			spec.Local = addr.Prefix.Addr()

			if bcast, ok := broadcast(addr.Prefix); ok && scope == nethelpers.ScopeGlobal {
				spec.Broadcast = bcast
			}
		} else {
			spec.Family = nethelpers.FamilyInet6
		}

		res = append(res, r)
	}

	return res
}

// linkIndexes numbers links as the kernel would: lo first, then in order of appearance.
func linkIndexes(addrs []Address) map[string]uint32 {
	idx := map[string]uint32{"lo": 1}
	next := uint32(2)

	for _, addr := range addrs {
		if _, ok := idx[addr.LinkName]; !ok {
			idx[addr.LinkName] = next
			next++
		}
	}

	return idx
}

// broadcast returns the IPv4 broadcast address of a prefix shorter than /31.
func broadcast(p netip.Prefix) (netip.Addr, bool) {
	if !p.Addr().Is4() || p.Bits() >= 31 {
		return netip.Addr{}, false
	}

	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := (uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])) | host

	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

package talossim

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/siderolabs/talos/pkg/machinery/config/machine"
	"github.com/siderolabs/talos/pkg/machinery/nethelpers"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Platforms lists the platform names a simulated machine can have, as Talos names them.
var Platforms = []string{"aws", "gcp", "azure", "hcloud", "openstack", "nocloud", "metal"}

// Machine is one simulated Talos machine: everything its Talos API serves.
type Machine struct {
	// Name is the Kubernetes node name, equal to the short hostname, e.g. "aws-0003".
	Name string `yaml:"name" json:"name"`
	// Domain is the optional DNS domain; the hostname FQDN is Name + "." + Domain when set.
	Domain string `yaml:"domain,omitempty" json:"domain,omitempty"`
	// ControlPlane marks control-plane machines (they also serve ControllerManagerConfig).
	ControlPlane bool `yaml:"controlPlane,omitempty" json:"controlPlane,omitempty"`
	// Platform is the Talos platform name, one of Platforms.
	Platform string `yaml:"platform" json:"platform"`
	// NoPlatformMetadata drops the PlatformMetadata resource (metal machines without metadata).
	NoPlatformMetadata bool `yaml:"noPlatformMetadata,omitempty" json:"noPlatformMetadata,omitempty"`
	// NoPlatformHostname leaves the hostname of PlatformMetadata empty, as Talos's metal platform does
	// without the talos.hostname= kernel argument.
	NoPlatformHostname bool `yaml:"noPlatformHostname,omitempty" json:"noPlatformHostname,omitempty"`
	// Nodename is the Kubernetes node name the machine publishes in its Nodename resource; empty means
	// Name. A fault knob: a machine that claims to be another node.
	Nodename string `yaml:"nodename,omitempty" json:"nodename,omitempty"`
	// NoNodename drops the Nodename resource (a machine that says of no node that it is it).
	NoNodename bool `yaml:"noNodename,omitempty" json:"noNodename,omitempty"`
	// MachineType is the type the machine's MachineType resource names, as Talos spells it: "controlplane",
	// "init", "worker" or "unknown" (no machine config yet). Empty means "controlplane" for a ControlPlane
	// machine and "worker" for the others.
	MachineType string `yaml:"machineType,omitempty" json:"machineType,omitempty"`
	// NoMachineType drops the MachineType resource (a Talos that does not publish it).
	NoMachineType bool `yaml:"noMachineType,omitempty" json:"noMachineType,omitempty"`

	Region       string `yaml:"region,omitempty" json:"region,omitempty"`
	Zone         string `yaml:"zone,omitempty" json:"zone,omitempty"`
	InstanceType string `yaml:"instanceType,omitempty" json:"instanceType,omitempty"`
	InstanceID   string `yaml:"instanceId,omitempty" json:"instanceId,omitempty"`
	ProviderID   string `yaml:"providerId,omitempty" json:"providerId,omitempty"`
	Spot         bool   `yaml:"spot,omitempty" json:"spot,omitempty"`
	InternalDNS  string `yaml:"internalDNS,omitempty" json:"internalDNS,omitempty"`
	ExternalDNS  string `yaml:"externalDNS,omitempty" json:"externalDNS,omitempty"`

	Tags map[string]string `yaml:"tags,omitempty" json:"tags,omitempty"`

	// Addresses become network.AddressStatus resources.
	Addresses []Address `yaml:"addresses,omitempty" json:"addresses,omitempty"`
	// VirtualIPs are the shared virtual IPs of the machine's config (a control-plane VIP, which the leading
	// control-plane machine holds on its link): served, with the pod and service ranges, as the node IP
	// exclusions of its NodeIPConfig. The machine that holds one lists it in Addresses too.
	VirtualIPs []netip.Addr `yaml:"virtualIPs,omitempty" json:"virtualIPs,omitempty"`
	// NodeIPs are the IPs the kubelet announces (provided-node-ip): IPv4 first, then IPv6 when dual stack.
	NodeIPs []netip.Addr `yaml:"nodeIPs,omitempty" json:"nodeIPs,omitempty"`
	// System becomes hardware.SystemInformation (absent when System.UUID is empty).
	System SystemInfo `yaml:"system,omitempty" json:"system,omitempty"`
	// Stage is the Talos machine stage name as runtime.MachineStage.String() prints it, e.g. "running".
	// Empty means "running".
	Stage string `yaml:"stage,omitempty" json:"stage,omitempty"`
}

// Address is one address assigned to a link of a machine.
type Address struct {
	LinkName string       `yaml:"linkName" json:"linkName"`
	Prefix   netip.Prefix `yaml:"prefix" json:"prefix"`
	// Scope is "global", "host" or "link" (any nethelpers.Scope name).
	Scope string `yaml:"scope,omitempty" json:"scope,omitempty"`
	// Flags are the address's flags, comma-separated nethelpers.AddressFlags names ("temporary",
	// "deprecated,permanent"...). Empty means "permanent", as for an address set by configuration.
	Flags string `yaml:"flags,omitempty" json:"flags,omitempty"`
}

// SystemInfo is the SMBIOS system information of a machine.
type SystemInfo struct {
	Manufacturer string `yaml:"manufacturer,omitempty" json:"manufacturer,omitempty"`
	ProductName  string `yaml:"productName,omitempty" json:"productName,omitempty"`
	Version      string `yaml:"version,omitempty" json:"version,omitempty"`
	SerialNumber string `yaml:"serialNumber,omitempty" json:"serialNumber,omitempty"`
	UUID         string `yaml:"uuid,omitempty" json:"uuid,omitempty"`
	WakeUpType   string `yaml:"wakeUpType,omitempty" json:"wakeUpType,omitempty"`
	SKUNumber    string `yaml:"skuNumber,omitempty" json:"skuNumber,omitempty"`
}

// Hostname returns the machine's hostname: the FQDN when a domain is set, the short name otherwise.
func (m Machine) Hostname() string {
	if m.Domain == "" {
		return m.Name
	}

	return m.Name + "." + m.Domain
}

// MachineStage returns the parsed Stage ("running" when empty).
func (m Machine) MachineStage() (runtime.MachineStage, error) {
	if m.Stage == "" {
		return runtime.MachineStageRunning, nil
	}

	stage, err := runtime.MachineStageString(m.Stage)
	if err != nil {
		return runtime.MachineStageUnknown, fmt.Errorf("failed to parse stage %q (valid: %q): %w", m.Stage, runtime.MachineStageStrings(), err)
	}

	return stage, nil
}

// DualStack reports whether the machine announces an IPv6 node IP.
func (m Machine) DualStack() bool {
	return slices.ContainsFunc(m.NodeIPs, func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() })
}

// Clone returns a deep copy of the machine.
func (m Machine) Clone() Machine {
	m.Tags = maps.Clone(m.Tags)
	m.Addresses = slices.Clone(m.Addresses)
	m.NodeIPs = slices.Clone(m.NodeIPs)
	m.VirtualIPs = slices.Clone(m.VirtualIPs)

	return m
}

// Validate checks that the machine can be served: a DNS-1123 name, a known platform, valid
// addresses, scopes and stage.
func (m Machine) Validate() error {
	if m.Name == "" {
		return errors.New("name is required")
	}

	if errs := validation.IsDNS1123Subdomain(m.Name); len(errs) > 0 {
		return fmt.Errorf("name %q is not a DNS-1123 name: %s", m.Name, errs[0])
	}

	if m.Domain != "" {
		if errs := validation.IsDNS1123Subdomain(m.Domain); len(errs) > 0 {
			return fmt.Errorf("domain %q is not a DNS-1123 name: %s", m.Domain, errs[0])
		}
	}

	if m.Nodename != "" {
		if errs := validation.IsDNS1123Subdomain(m.Nodename); len(errs) > 0 {
			return fmt.Errorf("nodename %q is not a DNS-1123 name: %s", m.Nodename, errs[0])
		}
	}

	if !slices.Contains(Platforms, m.Platform) {
		return fmt.Errorf("platform %q is not one of %q", m.Platform, Platforms)
	}

	for i, addr := range m.Addresses {
		if err := addr.Validate(); err != nil {
			return fmt.Errorf("address %d: %w", i, err)
		}
	}

	for i, ip := range m.NodeIPs {
		if !ip.IsValid() {
			return fmt.Errorf("nodeIPs[%d] is not a valid IP", i)
		}
	}

	for i, ip := range m.VirtualIPs {
		if !ip.IsValid() {
			return fmt.Errorf("virtualIPs[%d] is not a valid IP", i)
		}
	}

	if _, err := m.TalosMachineType(); err != nil {
		return err
	}

	if _, err := m.MachineStage(); err != nil {
		return err
	}

	return nil
}

// TalosMachineType returns the parsed MachineType (from ControlPlane when empty).
func (m Machine) TalosMachineType() (machine.Type, error) {
	switch m.MachineType {
	case "":
		if m.ControlPlane {
			return machine.TypeControlPlane, nil
		}

		return machine.TypeWorker, nil
	case machine.TypeInit.String(), machine.TypeControlPlane.String(), machine.TypeWorker.String(), machine.TypeUnknown.String():
		return machine.ParseType(m.MachineType)
	default:
		return machine.TypeUnknown, fmt.Errorf("machine type %q is not one of init, controlplane, worker, unknown", m.MachineType)
	}
}

// Validate checks the link name, prefix, scope and flags of the address.
func (a Address) Validate() error {
	if a.LinkName == "" {
		return errors.New("linkName is required")
	}

	if !a.Prefix.IsValid() {
		return errors.New("prefix is required")
	}

	if _, err := a.scope(); err != nil {
		return err
	}

	if a.Flags != "" {
		if _, err := nethelpers.AddressFlagsString(a.Flags); err != nil {
			return fmt.Errorf("failed to parse flags %q: %w", a.Flags, err)
		}
	}

	return nil
}

func (a Address) scope() (nethelpers.Scope, error) {
	if a.Scope == "" {
		return nethelpers.ScopeGlobal, nil
	}

	scope, err := nethelpers.ScopeString(a.Scope)
	if err != nil {
		return 0, fmt.Errorf("failed to parse scope %q: %w", a.Scope, err)
	}

	return scope, nil
}

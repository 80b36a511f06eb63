package specs

import "go.yaml.in/yaml/v4"

// MarshalYAML implements yaml.Marshaler.
func (x *KubeNodeSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *KubeNodeSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *PlatformMetadataSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *PlatformMetadataSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *MachineAddressesSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *MachineAddressesSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *MachineStatusSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *MachineStatusSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *ConfigSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *ConfigSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *NodeTransformSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *NodeTransformSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *ApplyStatusSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *ApplyStatusSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *NodeLifecycleSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *NodeLifecycleSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *KubeCSRSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *KubeCSRSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *CSRDecisionSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *CSRDecisionSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *IPAllocationSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *IPAllocationSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *IPPoolSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *IPPoolSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *KubeServiceSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *KubeServiceSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *KubeSyncSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *KubeSyncSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *KubeAPIServerSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *KubeAPIServerSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

// MarshalYAML implements yaml.Marshaler.
func (x *ControllerManagerConfigSpec) MarshalYAML() (any, error) { return marshalYAML(x) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (x *ControllerManagerConfigSpec) UnmarshalYAML(n *yaml.Node) error { return unmarshalYAML(n, x) }

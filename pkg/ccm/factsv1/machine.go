package factsv1

import (
	"maps"
	"reflect"
	"strings"

	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// Machine is what a host knows of one machine of a cluster: the facts talos-ccm otherwise reads from the
// machine's Talos API. Only NodeName is required. A field that gives a fact is named in the facts table
// (internal/rules, Fact.Adapter) by its JSON name, which checks it and converts it. The struct tags let a host keep machines in YAML or JSON
// files; the names are those of talos-ccm's own facts (PlatformMetadata, MachineAddresses).
type Machine struct {
	// NodeName is the name of the machine's Kubernetes Node, and the ID of its facts. The host says with it
	// which machine is which Node: talos-ccm gives a Node only facts that name it.
	NodeName string `json:"nodeName" yaml:"nodeName"`

	// Hostname is the machine's hostname; the Node name stands in for it when empty.
	Hostname string `json:"hostname,omitempty" yaml:"hostname,omitempty"`
	// Platform is Talos's platform name (aws, gcp, azure, metal, nocloud, openstack, oracle...). It decides
	// which addresses without a link name can be ExternalIPs (see the package documentation); empty is
	// taken as metal.
	Platform string `json:"platform,omitempty" yaml:"platform,omitempty"`
	// Region and Zone are the Node's topology labels.
	Region string `json:"region,omitempty" yaml:"region,omitempty"`
	Zone   string `json:"zone,omitempty" yaml:"zone,omitempty"`
	// InstanceType is the Node's instance-type label.
	InstanceType string `json:"instanceType,omitempty" yaml:"instanceType,omitempty"`
	// InstanceID is the platform's ID of the machine, which transformation rules may use.
	InstanceID string `json:"instanceID,omitempty" yaml:"instanceID,omitempty"`
	// ProviderID is the Node's providerID. Kubernetes never lets a Node's providerID change: on platforms
	// that have one (all but metal and nocloud), give it from the first write on, as talos-ccm waits for it
	// only a while (providerIDWaitSeconds) before it writes its talos://<platform>/<IP> fallback.
	ProviderID string `json:"providerID,omitempty" yaml:"providerID,omitempty"`
	// Spot marks a spot (preemptible) instance: the Node's lifecycle label.
	Spot bool `json:"spot,omitempty" yaml:"spot,omitempty"`
	// InternalDNS and ExternalDNS are the Node's InternalDNS and ExternalDNS addresses.
	InternalDNS string `json:"internalDNS,omitempty" yaml:"internalDNS,omitempty"`
	ExternalDNS string `json:"externalDNS,omitempty" yaml:"externalDNS,omitempty"`
	// Tags are the platform's tags of the machine, which transformation rules may select on.
	Tags map[string]string `json:"tags,omitempty" yaml:"tags,omitempty"`

	// MachineType is the machine's role in the cluster, as Talos's MachineType names it:
	// MachineTypeControlPlane or MachineTypeWorker; empty when unknown. Transformation rules may select on
	// it (machineType) and use it in templates (.MachineType).
	MachineType string `json:"machineType,omitempty" yaml:"machineType,omitempty"`

	// MachineUUID is the machine's SMBIOS UUID, if known: it tells machines apart better than an IP.
	MachineUUID string `json:"machineUUID,omitempty" yaml:"machineUUID,omitempty"`

	// NodeIPs are the machine's node IPs ("10.0.0.5", no prefix length), always addresses of the machine
	// itself that other machines reach it at (private ranges included; not loopback or link-local). They
	// are added to Addresses when missing there; the first is the Node's InternalIP when its kubelet claims
	// none of the machine's addresses.
	NodeIPs []string `json:"nodeIPs,omitempty" yaml:"nodeIPs,omitempty"`
	// Addresses are every address of the machine, in any order.
	Addresses []Address `json:"addresses,omitempty" yaml:"addresses,omitempty"`

	// Stage, Connected and Removed are the machine's lifecycle, as the host knows it: node-lifecycle taints
	// the Node of a machine shutting down, and (with DeleteRemovedNodes) deletes the Node of a removed one.
	// A host that gives none of them gives no lifecycle: node-lifecycle then has no facts about the machine,
	// and does nothing to its Node.

	// Stage is the machine's stage, by Talos's names (StageRunning, StageShuttingDown...); empty when the
	// host does not know it. A machine the host knows to be powered off is StageShuttingDown, the last stage
	// Talos reports before it.
	Stage Stage `json:"stage,omitempty" yaml:"stage,omitempty"`
	// Connected says whether the host reaches the machine now (Omni's connection to it); nil when the host
	// does not say, which is taken as reached. Give a machine not reached with the last stage the host knew:
	// a machine that was shutting down is still shut down when it no longer answers, while the loss of the
	// connection alone is never taken as evidence of anything.
	Connected *bool `json:"connected,omitempty" yaml:"connected,omitempty"`
	// Removed says that the host removed the machine from the cluster. Its Node is deleted once NotReady for
	// the stale-node grace, only when the host passes DeleteRemovedNodes to Sync; keep listing the machine
	// until its Node is gone, as the facts of a machine no longer listed are destroyed with its lifecycle.
	Removed bool `json:"removed,omitempty" yaml:"removed,omitempty"`
}

// Stage is a machine's stage, by the names Talos gives its machine stages (machinery's
// runtime.MachineStage), which Omni's machine stages follow.
type Stage string

// Stages.
const (
	// StageUnknown is a stage the host does not know.
	StageUnknown Stage = ""
	// StageBooting is a machine starting up.
	StageBooting Stage = "booting"
	// StageInstalling is a machine installing Talos.
	StageInstalling Stage = "installing"
	// StageMaintenance is a machine in maintenance mode, without its configuration.
	StageMaintenance Stage = "maintenance"
	// StageRunning is a machine up and running.
	StageRunning Stage = "running"
	// StageRebooting is a machine rebooting.
	StageRebooting Stage = "rebooting"
	// StageShuttingDown is a machine shutting down, or shut down (powered off): its Node gets the shutdown
	// taint while NotReady.
	StageShuttingDown Stage = "shutting down"
	// StageResetting is a machine wiping itself.
	StageResetting Stage = "resetting"
	// StageUpgrading is a machine upgrading Talos.
	StageUpgrading Stage = "upgrading"
)

// stages are the stages a host may give, besides StageUnknown.
var stages = []Stage{
	StageBooting, StageInstalling, StageMaintenance, StageRunning, StageRebooting, StageShuttingDown,
	StageResetting, StageUpgrading,
}

// Machine types, as Talos names them.
const (
	// MachineTypeControlPlane is a control-plane machine (Talos's init machine too).
	MachineTypeControlPlane = rules.MachineTypeControlPlane
	// MachineTypeWorker is a worker machine.
	MachineTypeWorker = rules.MachineTypeWorker
)

// Address is one address of a machine.
type Address struct {
	// Address is an IP ("10.0.0.5") or an IP with its prefix length ("10.0.0.5/24").
	Address string `json:"address" yaml:"address"`
	// Link is the name of the link the address is on, as Talos names it ("eth0", "external"), if known.
	Link string `json:"link,omitempty" yaml:"link,omitempty"`
	// Exposure is what the host knows of the address.
	Exposure Exposure `json:"exposure,omitempty" yaml:"exposure,omitempty"`
}

// Exposure is what a host knows of an address: whether it is the machine's public address. Talos says it
// with a link name (its "external" link holds the public address on clouds); a host that has no link
// names says it here.
type Exposure string

// Exposures.
const (
	// ExposureUnknown leaves the choice to the link and the platform, as for Talos's own facts.
	ExposureUnknown Exposure = ""
	// ExposurePublic is the machine's public address: an ExternalIP candidate, as an address on Talos's
	// "external" link is.
	ExposurePublic Exposure = "public"
	// ExposurePrivate is never an ExternalIP, whatever the link, the platform or a rule's
	// publicIPDiscovery.
	ExposurePrivate Exposure = "private"
)

// known reports whether talos-ccm knows the exposure.
func (e Exposure) known() bool {
	return e == ExposureUnknown || e == ExposurePublic || e == ExposurePrivate
}

// machineFact is a fact of the facts table that a Machine field gives.
type machineFact struct {
	fact rules.Fact
	// name is the JSON name of the Machine field, and index its index.
	name  string
	index int
}

// machineFacts are the facts a Machine gives, in the order of its fields: the facts of the facts table
// whose Adapter is the JSON name of a Machine field.
var machineFacts = func() []machineFact {
	t := reflect.TypeFor[Machine]()

	var out []machineFact

	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")

		for _, f := range rules.Facts() {
			if f.Adapter == name {
				out = append(out, machineFact{fact: f, name: name, index: i})
			}
		}
	}

	return out
}()

// value returns the fact's value in m, a map copied; ok is false when the value is empty (an empty text
// or map, false): the fact is absent.
func (mf machineFact) value(m *Machine) (v reflect.Value, ok bool) {
	v = reflect.ValueOf(m).Elem().Field(mf.index)

	switch {
	case v.Kind() == reflect.Map && v.Len() == 0, v.IsZero():
		return reflect.Value{}, false
	case v.Kind() == reflect.Map:
		return reflect.ValueOf(maps.Clone(v.Interface().(map[string]string))), true
	default:
		return v, true
	}
}

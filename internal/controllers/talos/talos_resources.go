package talos

import "fmt"

// talosResource names one resource of a machine that the sources read, as the Talos API serves it. The
// names are those of machinery's resources packages, spelled out here: those packages bring the machine
// config's packages (CEL among them) into the binary, whose pages are in every pod's memory, for a few
// strings. A test checks every name against machinery's.
type talosResource struct {
	namespace, typ, id string
}

// The resources the sources read, and the kind the sessions watch.
var (
	nodenameResource      = talosResource{namespace: "k8s", typ: "Nodenames.kubernetes.talos.dev", id: "nodename"}
	nodeIPConfigResource  = talosResource{namespace: "k8s", typ: "NodeIPConfigs.kubernetes.talos.dev", id: "kubelet"}
	platformResource      = talosResource{namespace: "runtime", typ: "PlatformMetadatas.talos.dev", id: "platformmetadata"}
	machineStatusResource = talosResource{namespace: "runtime", typ: "MachineStatuses.runtime.talos.dev", id: "machine"}
	systemInfoResource    = talosResource{namespace: "hardware", typ: "SystemInformations.hardware.talos.dev", id: "systeminformation"}
	machineTypeResource   = talosResource{namespace: "config", typ: "MachineTypes.config.talos.dev", id: "machine-type"}
	controllerManagerCfg  = talosResource{namespace: "controlplane", typ: "ControllerManagerConfigs.kubernetes.talos.dev", id: "kube-controller-manager"}
	addressStatusKind     = talosResource{namespace: "network", typ: "AddressStatuses.net.talos.dev"}
)

// Talos's machine types (machinery's config/machine.Type), as the MachineType resource carries them.
const (
	talosMachineTypeInit         = 1
	talosMachineTypeControlPlane = 2
	talosMachineTypeWorker       = 3
)

// machineStageNames are the names of Talos's machine stages (machinery's runtime.MachineStage), by number.
var machineStageNames = []string{
	"unknown", "booting", "installing", "maintenance", "running", "rebooting", "shutting down", "resetting", "upgrading",
}

// stageText is the name of a machine stage, as machinery's MachineStage prints it.
func stageText(stage int32) string {
	if stage < 0 || int(stage) >= len(machineStageNames) {
		return fmt.Sprintf("MachineStage(%d)", stage)
	}

	return machineStageNames[stage]
}

// familyText is the name of an address family, as machinery's nethelpers.Family prints it.
func familyText(family uint8) string {
	switch family {
	case 2:
		return "inet4"
	case 10:
		return "inet6"
	default:
		return fmt.Sprintf("Family(%d)", family)
	}
}

// scopeText is the name of an address scope, as machinery's nethelpers.Scope prints it.
func scopeText(scope uint8) string {
	switch scope {
	case 0:
		return "global"
	case 200:
		return "site"
	case 253:
		return "link"
	case 254:
		return "host"
	case 255:
		return "nowhere"
	default:
		return fmt.Sprintf("Scope(%d)", scope)
	}
}

// addressFlagNames are the names of the kernel's address flags (machinery's nethelpers.AddressFlag), from
// the lowest bit up.
var addressFlagNames = []string{
	"temporary", "nodad", "optimistic", "dadfailed", "homeaddress", "deprecated", "tentative", "permanent",
	"mngmtmpaddr", "noprefixroute", "mcautojoin", "stableprivacy",
}

// addressFlagList lists the names of the flags set in flags, nil for none; bits without a name are no
// flags.
func addressFlagList(flags uint32) []string {
	var names []string

	for bit, name := range addressFlagNames {
		if flags&(1<<bit) != 0 {
			names = append(names, name)
		}
	}

	return names
}

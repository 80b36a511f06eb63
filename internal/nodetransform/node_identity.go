package nodetransform

import (
	"fmt"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// Prefixes of machine keys: how a machine is told from another.
const (
	machineKeyUUID = "uuid/"
	machineKeyIP   = "ip/"
)

// MachineKey names the machine the facts were read from: its SystemInformation UUID where it has one,
// else the address its Talos API was asked through.
func MachineKey(pm *specs.PlatformMetadataSpec, ma *specs.MachineAddressesSpec) string {
	if uuid := pm.GetUuid(); uuid != "" {
		return machineKeyUUID + uuid
	}

	if ip := ma.GetNodeIp(); ip != "" {
		return machineKeyIP + ip
	}

	return machineKeyIP + pm.GetNodeIp()
}

// factsOfOtherNode says why facts filed under nodeName are not that Node's, or "": every fact must come
// from a machine that names itself nodeName (Talos's Nodename). The Talos source files no other facts; a
// host that writes the facts itself must say which node they are of, too.
func factsOfOtherNode(nodeName string, pm *specs.PlatformMetadataSpec, ma *specs.MachineAddressesSpec) string {
	for _, f := range []struct {
		kind, nodename, ip string
	}{
		{"platform metadata", pm.GetNodename(), pm.GetNodeIp()},
		{"addresses", ma.GetNodename(), ma.GetNodeIp()},
	} {
		switch f.nodename {
		case nodeName:
		case "":
			return fmt.Sprintf("the machine %s read at %s name no node (no nodename): they are not known to be %s's", f.kind, f.ip, nodeName)
		default:
			return fmt.Sprintf("the machine %s read at %s are node %s's, not %s's", f.kind, f.ip, f.nodename, nodeName)
		}
	}

	return ""
}

// PointerConflict says that the machine at the address the Node's kubelet points at was asked and is not
// this Node, or "".
func PointerConflict(nodeName string, status *specs.MachineStatusSpec) string {
	if !status.GetNodenameRead() || status.GetNodename() == nodeName {
		return ""
	}

	return talos.OtherMachineReason(status.GetNodeIp(), nodeName, status.GetNodename(), true)
}

// providerIDConflict says that the Node carries a providerID other than its machine's, or "". A kubelet
// may register its Node with any providerID, and providerIDs never change: a Node registered with another
// machine's is never initialized by talos-ccm, and one that is initialized already holds no claim on it.
func providerIDConflict(node *specs.KubeNodeSpec, desired string) string {
	current := node.GetProviderId()
	if current == "" || desired == "" || current == desired {
		return ""
	}

	return fmt.Sprintf("the Node was registered with providerID %s, its machine's is %s", current, desired)
}

// addConflict reports a conflict of a Node that keeps what its own machine gives: in its conflict (after
// any other) and its warnings.
func addConflict(out *specs.NodeTransformSpec, conflict string) {
	if out.Conflict == "" {
		out.Conflict = conflict
	} else {
		out.Conflict += "; " + conflict
	}

	out.Warnings = append(out.Warnings, conflict)
}

// Refuse takes from a NodeTransform everything it would grant: it is not initialized, its providerID is
// not written, and no certificate is approved from its addresses.
func Refuse(out *specs.NodeTransformSpec, conflict string) {
	out.Initialize = false
	out.Verified = false
	out.ProviderId = ""
	out.Pending = conflict
	out.Conflict = conflict

	delete(out.GetOrigins(), "providerID")
}

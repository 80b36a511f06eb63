package factsv1

import (
	"slices"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// disconnectedError is the last error of a machine the host does not reach, as MachineStatus shows it.
const disconnectedError = "the host does not reach the machine"

// MachineStatusSpec converts m's lifecycle (Stage, Connected, Removed) into talos-ccm's MachineStatus spec,
// which node-lifecycle reads as it reads the Talos source's: the stage; reachable unless the host says it
// does not reach the machine; removed, with the host's leave to delete the Node when DeleteRemovedNodes is
// given; and the machine's identity, its SMBIOS UUID (a Node whose machine's UUID changes while NotReady is
// stale, deleted with deleteStaleNodes) and the Node name. It returns nil when m gives no lifecycle, and
// then node-lifecycle has no facts about the machine, as before hosts could give them. Call Validate
// first: MachineStatusSpec takes m as it is.
func (m Machine) MachineStatusSpec(opts ...Option) *specs.MachineStatusSpec {
	if m.Stage == StageUnknown && m.Connected == nil && !m.Removed {
		return nil
	}

	o := newOptions(opts)

	out := &specs.MachineStatusSpec{
		Stage:         string(m.Stage),
		Reachable:     m.Connected == nil || *m.Connected,
		MachineUuid:   m.MachineUUID,
		Nodename:      m.NodeName,
		NodenameRead:  true,
		Removed:       m.Removed,
		DeleteRemoved: m.Removed && o.deleteRemovedNodes,
	}

	if !out.GetReachable() {
		out.LastError = disconnectedError
	}

	return out
}

// known reports whether talos-ccm knows the stage.
func (s Stage) known() bool {
	return s == StageUnknown || slices.Contains(stages, s)
}

package node

import (
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// stageShuttingDown is the Talos machine stage of a machine that is shutting down (or has, when it no
// longer answers after reporting it).
const stageShuttingDown = "shutting down"

// LifecycleOptions are the operator's choices about deleting Nodes; both are off by default.
type LifecycleOptions struct {
	// DeleteStaleNodes deletes a NotReady Node whose address now answers as a different machine.
	DeleteStaleNodes bool
	// DeletePreemptedSpotNodes deletes NotReady Nodes of GCP spot machines so that they re-register.
	DeletePreemptedSpotNodes bool
	// StaleNodeGrace is how long a Node must have been NotReady before it may be deleted, counted from when
	// talos-ccm first saw it NotReady (notReadyTimes).
	StaleNodeGrace time.Duration
	// Consumers are the controllers that take the NodeLifecycles as their primary input, whose finalizers
	// the NodeLifecycles carry.
	Consumers []resource.Finalizer
}

// LifecycleInput is everything a NodeLifecycle is computed from. Status and Platform are nil when Talos
// facts are missing; Previous is the last verdict (it carries the recorded machine identity and when
// talos-ccm first saw the Node NotReady).
type LifecycleInput struct {
	// NodeName is the Node's name, which its machine names itself when it is the Node's.
	NodeName string
	Now      time.Time
	Node     *specs.KubeNodeSpec
	Status   *specs.MachineStatusSpec
	Platform *specs.PlatformMetadataSpec
	Previous *specs.NodeLifecycleSpec
	Options  LifecycleOptions
}

// BuildNodeLifecycle decides whether a Node's machine is shut down and whether the Node is stale. It is a
// pure function: the clock is an input; the duration says when the verdict may change by time alone.
//
// It never concludes anything from the Talos API being unreachable: an outage must not delete Nodes. A
// Node is deleted only on positive evidence (another machine answering at its address, a preempted GCP
// spot machine, or the word of the host that feeds the facts that it removed the machine from the
// cluster), only when the operator (the host, for its word) enabled it, and only after the grace period,
// which a time the kubelet wrote can make longer but never shorter.
func BuildNodeLifecycle(in LifecycleInput) (*specs.NodeLifecycleSpec, time.Duration) {
	out := &specs.NodeLifecycleSpec{
		RecordedMachineUuid: in.Previous.GetRecordedMachineUuid(),
		RecordedNodeIp:      in.Previous.GetRecordedNodeIp(),
		MachineUuid:         in.Status.GetMachineUuid(),
		Stage:               in.Status.GetStage(),
		Reachable:           in.Status.GetReachable(),
		NodeReady:           in.Node.GetReady(),
	}

	// The identity is recorded once the Node is initialized and its machine answers.
	if out.RecordedMachineUuid == "" && !in.Node.GetUninitialized() && out.Reachable && out.MachineUuid != "" {
		out.RecordedMachineUuid = out.MachineUuid
	}

	// The address is recorded wherever the recorded machine answers as the Node: the machine's facts carry
	// a UUID only once it said it is the Node. A new address the kubelet followed (a DHCP lease changed, say)
	// is recorded once the machine answers there; one it points at another machine never is.
	if out.Reachable && out.MachineUuid != "" && out.MachineUuid == out.RecordedMachineUuid && in.Status.GetNodeIp() != "" {
		out.RecordedNodeIp = in.Status.GetNodeIp()
	}

	if in.Node.GetReady() {
		out.Reason = "the Node is Ready"

		return out, 0
	}

	out.NotReadyObserved, out.NotReadySince = notReadyTimes(in)

	switch {
	case in.Status == nil:
		out.Reason = "the Node is NotReady; no Talos facts about its machine"
	case out.Stage == stageShuttingDown && out.Reachable:
		out.Shutdown = true
		out.Reason = "the Node is NotReady and its machine reports that it is shutting down"
	case out.Stage == stageShuttingDown:
		out.Shutdown = true
		out.Reason = "the Node is NotReady and its machine stopped answering after reporting that it was shutting down"
	case in.Status.GetRemoved():
		out.Reason = "the Node is NotReady and the host removed its machine from the cluster"
	case !out.Reachable:
		out.Reason = "the Node is NotReady and its machine does not answer (not evidence of anything: nothing is done)"
	case addressMoved(in, out):
		out.Reason = fmt.Sprintf("the Node is NotReady; its address %s is not %s, where its machine answered as it: "+
			"what answers there is no evidence about the Node (the kubelet's claim: nothing is done)", in.Status.GetNodeIp(), out.RecordedNodeIp)
	case in.Status.GetNodenameRead() && in.Status.GetNodename() != in.NodeName:
		out.Reason = "the Node is NotReady; the machine at its address is not it"
	default:
		out.Reason = fmt.Sprintf("the Node is NotReady; its machine answers in stage %q", out.Stage)
	}

	evidence, enabled := staleEvidence(in, out)
	if evidence == "" {
		return out, 0
	}

	if !enabled {
		out.Reason += "; " + evidence + " (the Node would be deleted with " + deletionSwitch(in) + " on)"

		return out, 0
	}

	notReadyFor := in.Now.Sub(out.NotReadySince.AsTime())
	if notReadyFor < in.Options.StaleNodeGrace {
		wait := in.Options.StaleNodeGrace - notReadyFor

		out.Reason += fmt.Sprintf("; %s: deleted once NotReady for %s (in %s)", evidence, in.Options.StaleNodeGrace, wait.Round(time.Second))

		return out, wait
	}

	out.Delete = true
	out.Reason += fmt.Sprintf("; %s, and NotReady for %s: the Node is deleted", evidence, notReadyFor.Round(time.Second))

	return out, 0
}

// notReadyTimes returns when talos-ccm first saw the Node NotReady, and when the grace before a deletion
// starts.
//
// The first is talos-ccm's own observation: the previous verdict's while that verdict saw the Node NotReady
// too, in.Now otherwise (a Node seen Ready in between starts over). The verdict is persisted, so a restart
// does not reset it; a verdict lost with the state starts the grace later, never earlier. A verdict from an
// older talos-ccm has no observation, only the kubelet's time, and starts over as well.
//
// The Ready condition's lastTransitionTime is written by the kubelet, which a stolen credential controls:
// it may start the grace later (a kubelet that turned NotReady again while talos-ccm was not watching says
// so there), never earlier. The Node's creation time is the apiserver's: a Node deleted and re-created under
// the same name starts over.
func notReadyTimes(in LifecycleInput) (observed, since *timestamppb.Timestamp) {
	observed = timestamppb.New(in.Now)
	if prev := in.Previous; prev != nil && !prev.GetNodeReady() && prev.GetNotReadyObserved() != nil {
		observed = prev.GetNotReadyObserved()
	}

	since = observed

	for _, t := range []*timestamppb.Timestamp{in.Node.GetReadyChanged(), in.Node.GetCreated()} {
		if t != nil && t.AsTime().After(since.AsTime()) {
			since = t
		}
	}

	return observed, since
}

// staleEvidence returns positive evidence that the Node's machine is gone, and whether the operator
// enabled deletion for that kind of evidence.
func staleEvidence(in LifecycleInput, out *specs.NodeLifecycleSpec) (string, bool) {
	// The host's word comes from the host's own hold on the machine, not from the kubelet's address: no
	// address of the kubelet's can make it or unmake it.
	if in.Status.GetRemoved() {
		return "the host removed the machine from the cluster", in.Status.GetDeleteRemoved()
	}

	if addressMoved(in, out) {
		// The Node's machine may still answer where it did: only the platform's word below is evidence.
		return spotEvidence(in)
	}

	if out.Reachable && in.Status.GetNodenameRead() && in.Status.GetNodename() != in.NodeName && in.NodeName != "" {
		return "the machine answering at the node's address names itself " + nodenameText(in.Status.GetNodename()), in.Options.DeleteStaleNodes
	}

	if out.Reachable && out.MachineUuid != "" && out.RecordedMachineUuid != "" && out.MachineUuid != out.RecordedMachineUuid {
		return fmt.Sprintf("the machine answering at the node's address is %s, not %s", out.MachineUuid, out.RecordedMachineUuid),
			in.Options.DeleteStaleNodes
	}

	return spotEvidence(in)
}

// deletionSwitch names what enables the deletion for the evidence staleEvidence found: the host's opt-in
// for its own word, the operator's flags otherwise.
func deletionSwitch(in LifecycleInput) string {
	if in.Status.GetRemoved() {
		return "the host's opt-in (factsv1.DeleteRemovedNodes)"
	}

	return "the deletion flag"
}

// spotEvidence says that the Node's machine, by its platform's facts (read only from the machine that said
// it is the Node), is a GCP spot machine: NotReady, it was preempted.
func spotEvidence(in LifecycleInput) (string, bool) {
	if in.Platform.GetPlatform() == "gcp" && in.Platform.GetSpot() {
		return "preempted GCP spot machine", in.Options.DeletePreemptedSpotNodes
	}

	return "", false
}

// addressMoved says that the machine facts are from another address than the one where the Node's recorded
// machine answered as it. The address asked is the kubelet's provided-node-ip claim: a kubelet pointing it
// at another machine must not make that machine evidence that its Node is stale (and have talos-ccm delete
// a Node that its own credential may not delete).
func addressMoved(in LifecycleInput, out *specs.NodeLifecycleSpec) bool {
	ip := in.Status.GetNodeIp()

	return out.RecordedNodeIp != "" && ip != "" && ip != out.RecordedNodeIp
}

func nodenameText(nodename string) string {
	if nodename == "" {
		return "no node"
	}

	return "node " + nodename
}

package ccmctl

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// NodeResources are the resources of what talos-ccm knows and decided about one Node; a nil field is a
// resource that does not exist (yet).
type NodeResources struct {
	Transform *specs.NodeTransformSpec
	Node      *specs.KubeNodeSpec
	Machine   *specs.MachineStatusSpec
	Lifecycle *specs.NodeLifecycleSpec
	Apply     *specs.ApplyStatusSpec
	Name      string
	// TransformVersion is the version of the NodeTransform, which ApplyStatus.appliedVersion refers to.
	TransformVersion string
}

// ReadNodeResources reads the resources about the Node name. A Node that talos-ccm neither mirrors nor
// decided about is an error.
func ReadNodeResources(ctx context.Context, st state.State, name string) (NodeResources, error) {
	facts := NodeResources{Name: name}

	nt, err := stateread.Optional[*node.NodeTransform](ctx, st, name)
	if err != nil {
		return facts, err
	}

	if nt != nil {
		facts.Transform = nt.TypedSpec().Value
		facts.TransformVersion = nt.Metadata().Version().String()
	}

	kn, err := stateread.Optional[*kube.KubeNode](ctx, st, name)
	if err != nil {
		return facts, err
	}

	if kn != nil {
		facts.Node = kn.TypedSpec().Value
	}

	if nt == nil && kn == nil {
		return facts, fmt.Errorf("node %q not found: talos-ccm has neither seen a Node of that name nor decided about one", name)
	}

	ms, err := stateread.Optional[*talos.MachineStatus](ctx, st, name)
	if err != nil {
		return facts, err
	}

	if ms != nil {
		facts.Machine = ms.TypedSpec().Value
	}

	nl, err := stateread.Optional[*node.NodeLifecycle](ctx, st, name)
	if err != nil {
		return facts, err
	}

	if nl != nil {
		facts.Lifecycle = nl.TypedSpec().Value
	}

	as, err := stateread.Optional[*sink.ApplyStatus](ctx, st, sink.ApplyStatusID(sink.KindNode, name))
	if err != nil {
		return facts, err
	}

	if as != nil {
		facts.Apply = as.TypedSpec().Value
	}

	return facts, nil
}

// WriteExplanation writes, for one Node, the state of its initialization, what is pending and why, and
// every providerID, label, annotation, taint and address that talos-ccm wants on it, with the fact or
// rule it comes from and whether the Node has it.
func WriteExplanation(w io.Writer, f NodeResources) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)

	nt := f.Transform
	line := func(key, value string) {
		if key != "" {
			key += ":"
		}

		fmt.Fprintf(tw, "%s\t%s\n", key, value)
	}

	line("Node", f.Name)

	if nt != nil {
		line("Platform", cell(nt.GetPlatform()))
	}

	line("Initialized", initializedState(f))

	pending := pendingReasons(f)
	if len(pending) == 0 {
		line("Pending", "nothing")
	}

	for i, reason := range pending {
		line(label(i, "Pending"), reason)
	}

	line("Machine", machineState(f.Machine))

	if nt != nil {
		line("Bound to", boundState(nt))
	}

	if f.Lifecycle != nil && (f.Lifecycle.GetShutdown() || f.Lifecycle.GetDelete()) {
		line("Lifecycle", lifecycleState(f.Lifecycle))
	}

	line("Last apply", applyState(f))

	if nt != nil {
		line("Matched rules", cell(strings.Join(nt.GetMatchedRules(), ", ")))

		for i, warning := range nt.GetWarnings() {
			line(label(i, "Warnings"), warning)
		}
	}

	if err := tw.Flush(); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	rows := wantedRows(nt, f.Node)
	if len(rows) == 0 {
		return nil
	}

	fmt.Fprintln(w)

	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)

	fmt.Fprintln(tw, "WHAT\tKEY\tVALUE\tORIGIN\tON NODE")

	for _, row := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.what, cell(row.key), cell(row.value), cell(row.origin), row.onNode)
	}

	if err := tw.Flush(); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	return nil
}

// label names the first line of a list; the others continue it.
func label(i int, name string) string {
	if i == 0 {
		return name
	}

	return ""
}

func initializedState(f NodeResources) string {
	switch {
	case f.Node == nil:
		return "no: the Node is not registered (or not seen yet)"
	case !f.Node.GetUninitialized():
		return "yes"
	case f.Transform.GetInitialize():
		return "not yet: the decision is complete, the uninitialized taint goes once it is applied"
	default:
		return "no"
	}
}

// pendingReasons explains what keeps the Node from being initialized or up to date.
func pendingReasons(f NodeResources) []string {
	var out []string

	switch {
	case f.Transform == nil:
		out = append(out, "no decision yet: talos-ccm has no NodeTransform for this Node (no active config yet, or the cloud-node controller is disabled)")
	case f.Transform.GetPending() != "":
		out = append(out, f.Transform.GetPending())
	}

	switch {
	case f.Machine == nil:
		out = append(out, "no Talos facts yet: the machine has not been read")
	case !f.Machine.GetReachable():
		reason := "the machine's Talos API does not answer"
		if e := f.Machine.GetLastError(); e != "" {
			reason += ": " + e
		}

		out = append(out, reason)
	}

	for _, s := range f.Transform.GetSkippedRules() {
		out = append(out, fmt.Sprintf("rule %s not applied: %s", s.GetRule(), s.GetReason()))
	}

	if e := f.Apply.GetError(); e != "" {
		out = append(out, fmt.Sprintf("the last apply failed (%d in a row): %s", f.Apply.GetConsecutiveFailures(), e))
	}

	return out
}

func machineState(m *specs.MachineStatusSpec) string {
	if m == nil {
		return "not read yet"
	}

	parts := []string{}

	if m.GetReachable() {
		parts = append(parts, "reachable")
	} else {
		parts = append(parts, "unreachable")
	}

	if m.GetStage() != "" {
		parts = append(parts, "stage "+m.GetStage())
	}

	if m.GetNodeIp() != "" {
		parts = append(parts, "Talos API at "+m.GetNodeIp())
	}

	switch {
	case m.GetNodenameRead() && m.GetNodename() == "":
		parts = append(parts, "names itself no node")
	case m.GetNodenameRead():
		parts = append(parts, "names itself node "+m.GetNodename())
	}

	if m.GetLastSeen() != nil {
		parts = append(parts, "last seen "+m.GetLastSeen().AsTime().UTC().Format(time.RFC3339))
	}

	if !m.GetReachable() && m.GetLastError() != "" {
		parts = append(parts, "last error: "+m.GetLastError())
	}

	return strings.Join(parts, ", ")
}

func lifecycleState(l *specs.NodeLifecycleSpec) string {
	var verdict string

	switch {
	case l.GetDelete():
		verdict = "to be deleted"
	default:
		verdict = "shut down"
	}

	if l.GetReason() != "" {
		verdict += ": " + l.GetReason()
	}

	return verdict
}

func applyState(f NodeResources) string {
	a := f.Apply
	if a == nil {
		return "never applied"
	}

	parts := []string{}

	if a.GetAppliedAt() != nil {
		parts = append(parts, a.GetAppliedAt().AsTime().UTC().Format(time.RFC3339))
	}

	if v := a.GetAppliedVersion(); v != "" {
		decision := "decision version " + v

		switch f.TransformVersion {
		case "", v:
		default:
			// Only applies that write something record their version: a later decision that needed no write
			// leaves the older version here.
			decision += " (latest: " + f.TransformVersion + ")"
		}

		parts = append(parts, decision)
	}

	switch {
	case a.GetError() != "":
		parts = append(parts, "error: "+a.GetError())
	case len(a.GetWrites()) > 0:
		parts = append(parts, "writes: "+strings.Join(a.GetWrites(), ", "))
	default:
		parts = append(parts, "nothing to write")
	}

	return strings.Join(parts, ", ")
}

// wantedRow is one value talos-ccm wants on the Node.
type wantedRow struct {
	what, key, value, origin, onNode string
}

// Values of the ON NODE column.
const (
	onNodeYes     = "yes"
	onNodeNo      = "no"
	onNodeUnknown = "n/a"
)

// wantedRows lists every value of the transform, in a stable order, with its origin and whether the
// Node (as mirrored) has it. Annotations are not mirrored, so their presence is not known.
func wantedRows(nt *specs.NodeTransformSpec, kn *specs.KubeNodeSpec) []wantedRow {
	origins := nt.GetOrigins()

	var rows []wantedRow

	if id := nt.GetProviderId(); id != "" {
		rows = append(rows, wantedRow{what: "providerID", value: id, origin: origins[node.OriginProviderID], onNode: compare(kn, id, kn.GetProviderId(), kn.GetProviderId() != "")})
	}

	for _, key := range slices.Sorted(maps.Keys(nt.GetLabels())) {
		value := nt.GetLabels()[key]
		have, ok := kn.GetLabels()[key]

		rows = append(rows, wantedRow{what: "label", key: key, value: value, origin: origins[node.OriginKey(node.OriginKindLabel, key)], onNode: compare(kn, value, have, ok)})
	}

	for _, key := range slices.Sorted(maps.Keys(nt.GetAnnotations())) {
		rows = append(rows, wantedRow{what: "annotation", key: key, value: nt.GetAnnotations()[key], origin: origins[node.OriginKey(node.OriginKindAnnotation, key)], onNode: onNodeUnknown})
	}

	for _, taint := range nt.GetTaints() {
		value := taintValue(taint)

		var (
			have  string
			found bool
		)

		for _, t := range kn.GetTaints() {
			if t.GetKey() == taint.GetKey() {
				have, found = taintValue(t), true

				break
			}
		}

		rows = append(rows, wantedRow{what: "taint", key: taint.GetKey(), value: value, origin: origins[node.OriginKey(node.OriginKindTaint, taint.GetKey())], onNode: compare(kn, value, have, found)})
	}

	for _, a := range nt.GetAddresses() {
		found := slices.ContainsFunc(kn.GetAddresses(), func(b *specs.NodeAddress) bool {
			return b.GetType() == a.GetType() && b.GetAddress() == a.GetAddress()
		})

		rows = append(rows, wantedRow{
			what: "address", key: a.GetType(), value: a.GetAddress(),
			origin: node.AddressOrigin(nt, a),
			onNode: compare(kn, a.GetAddress(), a.GetAddress(), found),
		})
	}

	return rows
}

// compare says whether the Node has the wanted value: yes, no, or the different value it has.
func compare(kn *specs.KubeNodeSpec, want, have string, found bool) string {
	switch {
	case kn == nil:
		return onNodeUnknown
	case !found:
		return onNodeNo
	case want == have:
		return onNodeYes
	default:
		return fmt.Sprintf("differs: %q", have)
	}
}

// taintValue formats a taint as the config file does: "value:Effect", or "Effect" without a value.
func taintValue(t *specs.Taint) string {
	if t.GetValue() == "" {
		return t.GetEffect()
	}

	return t.GetValue() + ":" + t.GetEffect()
}

// Explain reads the facts about the Node name and writes the explanation to w.
func Explain(ctx context.Context, st state.State, name string, w io.Writer) error {
	facts, err := ReadNodeResources(ctx, st, name)
	if err != nil {
		return err
	}

	return WriteExplanation(w, facts)
}

// boundState says which machine the Node is bound to, or what keeps it from its machine.
func boundState(nt *specs.NodeTransformSpec) string {
	switch {
	case nt.GetVerified() && nt.GetConflict() != "":
		return fmt.Sprintf("machine %s (verified); %s", nt.GetMachine(), nt.GetConflict())
	case nt.GetVerified():
		return fmt.Sprintf("machine %s (verified: it names itself this Node)", nt.GetMachine())
	case nt.GetConflict() != "":
		return "nothing: " + nt.GetConflict()
	default:
		return "nothing yet"
	}
}

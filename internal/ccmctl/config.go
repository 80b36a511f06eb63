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
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/nodetransform"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/rules"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// Change actions of a config dry run.
const (
	ActionAdd    = "add"
	ActionChange = "change"
	ActionRemove = "remove"
)

// Change is one difference between the NodeTransform in force and the one a config would give.
type Change struct {
	Action string
	What   string
	Key    string
	From   string
	To     string
	// Origin is the fact or rule behind the new value (the old one's for a removal).
	Origin string
}

// DiffTransforms lists what changes on a Node from the decision cur to next: providerID, labels,
// annotations, taints (by key) and addresses, in that order, keys sorted. A nil cur is an empty decision.
func DiffTransforms(cur, next *specs.NodeTransformSpec) []Change {
	var changes []Change

	diffValue := func(what, key, from, to, fromOrigin, toOrigin string, hadFrom, hasTo bool) {
		switch {
		case hasTo && !hadFrom:
			changes = append(changes, Change{Action: ActionAdd, What: what, Key: key, To: to, Origin: toOrigin})
		case !hasTo && hadFrom:
			changes = append(changes, Change{Action: ActionRemove, What: what, Key: key, From: from, Origin: fromOrigin})
		case hasTo && from != to:
			changes = append(changes, Change{Action: ActionChange, What: what, Key: key, From: from, To: to, Origin: toOrigin})
		}
	}

	diffValue("providerID", "", cur.GetProviderId(), next.GetProviderId(),
		cur.GetOrigins()[node.OriginProviderID], next.GetOrigins()[node.OriginProviderID], cur.GetProviderId() != "", next.GetProviderId() != "")

	diffMap := func(what string, from, to, fromOrigins, toOrigins map[string]string) {
		keys := slices.Sorted(maps.Keys(from))
		for k := range to {
			if _, ok := from[k]; !ok {
				keys = append(keys, k)
			}
		}

		slices.Sort(keys)

		for _, k := range keys {
			a, hadA := from[k]
			b, hasB := to[k]

			diffValue(what, k, a, b, fromOrigins[node.OriginKey(what, k)], toOrigins[node.OriginKey(what, k)], hadA, hasB)
		}
	}

	diffMap("label", cur.GetLabels(), next.GetLabels(), cur.GetOrigins(), next.GetOrigins())
	diffMap("annotation", cur.GetAnnotations(), next.GetAnnotations(), cur.GetOrigins(), next.GetOrigins())
	diffMap("taint", taintMap(cur.GetTaints()), taintMap(next.GetTaints()), cur.GetOrigins(), next.GetOrigins())

	addressKey := func(a *specs.NodeAddress) string { return a.GetType() + "/" + a.GetAddress() }

	for _, a := range cur.GetAddresses() {
		if !slices.ContainsFunc(next.GetAddresses(), func(b *specs.NodeAddress) bool { return addressKey(a) == addressKey(b) }) {
			changes = append(changes, Change{Action: ActionRemove, What: "address", Key: a.GetType(), From: a.GetAddress(), Origin: node.AddressOrigin(cur, a)})
		}
	}

	for _, b := range next.GetAddresses() {
		if !slices.ContainsFunc(cur.GetAddresses(), func(a *specs.NodeAddress) bool { return addressKey(a) == addressKey(b) }) {
			changes = append(changes, Change{Action: ActionAdd, What: "address", Key: b.GetType(), To: b.GetAddress(), Origin: node.AddressOrigin(next, b)})
		}
	}

	return changes
}

func taintMap(taints []*specs.Taint) map[string]string {
	out := make(map[string]string, len(taints))

	for _, t := range taints {
		out[t.GetKey()] = taintValue(t)
	}

	return out
}

// DryRun is the result of a config dry run on one Node.
type DryRun struct {
	// Rules are the names of the config's rules, in order.
	Rules []string
	// Result is the NodeTransform the config gives.
	Result  *specs.NodeTransformSpec
	Changes []Change
	// HasCurrent is false when the Node has no NodeTransform yet: every value is then an addition.
	HasCurrent bool
}

// TestConfig runs the transformation of the Node name with the config file's settings cfg on the facts
// that talos-ccm holds about the Node, and compares the result with the decision in force.
func TestConfig(ctx context.Context, st state.State, cfg *specs.ConfigSpec, name string, now time.Time) (DryRun, error) {
	kn, err := stateread.Optional[*kube.KubeNode](ctx, st, name)
	if err != nil {
		return DryRun{}, err
	}

	if kn == nil {
		return DryRun{}, fmt.Errorf("node %q not found: talos-ccm has not seen a Node of that name", name)
	}

	pm, err := stateread.Optional[*talos.PlatformMetadata](ctx, st, name)
	if err != nil {
		return DryRun{}, err
	}

	ma, err := stateread.Optional[*talos.MachineAddresses](ctx, st, name)
	if err != nil {
		return DryRun{}, err
	}

	ms, err := stateread.Optional[*talos.MachineStatus](ctx, st, name)
	if err != nil {
		return DryRun{}, err
	}

	live, err := stateread.Optional[*config.Config](ctx, st, config.ActiveID)
	if err != nil {
		return DryRun{}, err
	}

	cur, err := stateread.Optional[*node.NodeTransform](ctx, st, name)
	if err != nil {
		return DryRun{}, err
	}

	in := nodetransform.Input{
		Now:      now,
		NodeName: name,
		Node:     kn.TypedSpec().Value,
		Config:   dryRunConfig(specOf(live), cfg),
	}

	if pm != nil {
		in.Platform = pm.TypedSpec().Value
	}

	if ma != nil {
		in.Addresses = ma.TypedSpec().Value
	}

	if ms != nil {
		in.Status = ms.TypedSpec().Value
	}

	result, _ := nodetransform.Build(in)

	run := DryRun{Result: result, HasCurrent: cur != nil}

	for i, rule := range cfg.GetTransformations() {
		run.Rules = append(run.Rules, rules.RuleID(i, rule))
	}

	var curSpec *specs.NodeTransformSpec
	if cur != nil {
		curSpec = cur.TypedSpec().Value
	}

	run.Changes = DiffTransforms(curSpec, result)

	return run, nil
}

func specOf(c *config.Config) *specs.ConfigSpec {
	if c == nil {
		return nil
	}

	return c.TypedSpec().Value
}

// dryRunConfig is the Config that talos-ccm would hold with the file in place of its current one: merged
// with the command-line settings as talos-ccm merges them (configfile.Merge). Those settings are read back
// from the Config in force, which does not keep them apart from the old file's: a cluster name counts as a
// flag's unless it came from the old file, and preferIPv6 and the providerID wait are taken as they are.
func dryRunConfig(live, file *specs.ConfigSpec) *specs.ConfigSpec {
	if live == nil {
		return configfile.Merge(&specs.ConfigSpec{}, nil, file)
	}

	flags := &specs.ConfigSpec{
		PreferIpv6:            live.GetPreferIpv6(),
		ProviderIdWaitSeconds: live.GetProviderIdWaitSeconds(),
		Source:                "flags",
	}

	var explicit []string

	source := live.GetClusterNameSource()

	switch {
	case strings.HasPrefix(source, "flag"):
		flags.ClusterName, flags.ClusterNameSource = live.GetClusterName(), source
		explicit = append(explicit, "cluster_name")
	case !strings.HasPrefix(source, "global.clusterName"):
		flags.ClusterName, flags.ClusterNameSource = live.GetClusterName(), source
	}

	return configfile.Merge(flags, explicit, file)
}

// WriteDryRun writes which rules match the Node and what would change on it.
func WriteDryRun(w io.Writer, name string, run DryRun) error {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)

	fmt.Fprintf(tw, "RULE\tMATCHES %s\n", name)

	matched := run.Result.GetMatchedRules()

	for _, rule := range run.Rules {
		verdict := "no"

		switch {
		case slices.Contains(matched, rule):
			verdict = "yes"
		default:
			for _, s := range run.Result.GetSkippedRules() {
				if s.GetRule() == rule {
					verdict = "yes, but not applied: " + s.GetReason()
				}
			}
		}

		fmt.Fprintf(tw, "%s\t%s\n", rule, verdict)
	}

	if len(run.Rules) == 0 {
		fmt.Fprintln(tw, "(no transformation rules)\t")
	}

	if err := tw.Flush(); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	fmt.Fprintln(w)

	if p := run.Result.GetPending(); p != "" {
		fmt.Fprintf(w, "Pending: %s\n", p)
	}

	for _, warning := range run.Result.GetWarnings() {
		fmt.Fprintf(w, "Warning: %s\n", warning)
	}

	if len(run.Changes) == 0 {
		fmt.Fprintf(w, "No change on node %s.\n", name)

		return nil
	}

	if run.HasCurrent {
		fmt.Fprintf(w, "Changes on node %s, compared with the decision in force:\n", name)
	} else {
		fmt.Fprintf(w, "Node %s has no decision yet; it would get:\n", name)
	}

	tw = tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)

	fmt.Fprintln(tw, "CHANGE\tWHAT\tKEY\tFROM\tTO\tORIGIN")

	for _, c := range run.Changes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", c.Action, c.What, cell(c.Key), cell(c.From), cell(c.To), cell(c.Origin))
	}

	if err := tw.Flush(); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	return nil
}

// summary describes a valid config in one line.
func summary(cfg *specs.ConfigSpec) string {
	rules := len(cfg.GetTransformations())

	parts := []string{fmt.Sprintf("%d transformation rule%s", rules, plural(rules))}

	if cfg.GetClusterName() != "" {
		parts = append(parts, "cluster name "+cfg.GetClusterName())
	}

	if cfg.GetCsrApproval() != nil {
		parts = append(parts, "CSR approval settings")
	}

	return strings.Join(parts, ", ")
}

func plural(n int) string {
	if n == 1 {
		return ""
	}

	return "s"
}

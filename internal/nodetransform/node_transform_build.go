package nodetransform

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/kubenames"
	"github.com/talos-ccm/talos-ccm/internal/nodeaddress"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

const (
	originTalosHostname    = "Talos platformMetadata.hostname"
	originNodeNameHostname = "Node name (Talos platformMetadata has no hostname)"
)

// fallbackPlatform is the platform assumed for a machine without PlatformMetadata.
const fallbackPlatform = "metal"

// Input is everything a NodeTransform is computed from. Platform and Addresses are nil until the
// Talos source has read the machine.
type Input struct {
	Now       time.Time
	Node      *specs.KubeNodeSpec
	Platform  *specs.PlatformMetadataSpec
	Addresses *specs.MachineAddressesSpec
	Config    *specs.ConfigSpec
	// Status is what the machine at the address the Node's kubelet points at said when last asked; nil
	// when it was not (or when a host writes the facts itself).
	Status   *specs.MachineStatusSpec
	NodeName string
}

// Build computes the desired state of one Node from its facts and the transformation rules of the Config.
// It is a pure function: the clock is an input. The duration is when the result should be computed again
// because it depends on time (the providerID wait); zero means only a change of the inputs matters.
//
// The strings the result repeats from Node to Node are shared with the other results (see shareStrings):
// what every Node holds for as long as it exists is its NodeTransform.
func Build(in Input) (*specs.NodeTransformSpec, time.Duration) {
	out, requeue := build(in)

	shareStrings(out)

	return out, requeue
}

func build(in Input) (*specs.NodeTransformSpec, time.Duration) {
	out := &specs.NodeTransformSpec{
		Labels:  map[string]string{},
		Origins: map[string]string{},
	}

	pointer := PointerConflict(in.NodeName, in.Status)

	if in.Platform == nil || in.Addresses == nil {
		out.Pending = "waiting for the machine's Talos facts (PlatformMetadata and addresses)"

		if pointer != "" {
			out.Pending, out.Conflict = pointer, pointer
		}

		return out, 0
	}

	// Facts are the Node's only when its machine says it is the Node: the address they were read at is
	// the kubelet's claim.
	if why := factsOfOtherNode(in.NodeName, in.Platform, in.Addresses); why != "" {
		out.Pending, out.Conflict = why, why

		return out, 0
	}

	out.Verified = true
	out.Machine = MachineKey(in.Platform, in.Addresses)

	if pointer != "" {
		// The kubelet now points at another machine: the Node keeps what its own machine said, and gets
		// nothing of the other one.
		addConflict(out, pointer+": the Node keeps the facts its own machine gave before")
	}

	out.Platform = in.Platform.GetPlatform()
	if out.Platform == "" {
		out.Platform = fallbackPlatform
	}

	// The rules see the platform the labels show, and their platformMetadata overrides feed everything
	// below: addresses (DNS names), the well-known labels and the providerID.
	facts := in.Platform.CloneVT()
	facts.Platform = out.Platform

	// Talos's metal platform fills the hostname only from the talos.hostname= kernel argument, so most
	// metal machines report none: the Node name stands in for it in selectors and templates, as in the
	// Talos CCM. (The Hostname address is the Node name always, see nodeaddress.Choose.)
	hostnameOrigin := originTalosHostname
	if facts.GetHostname() == "" && in.NodeName != "" {
		facts.Hostname = in.NodeName
		hostnameOrigin = originNodeNameHostname
		out.Origins[node.OriginFactHostname] = originNodeNameHostname
	}

	applied := rules.Apply(in.Config.GetTransformations(), facts)
	pm := applied.Facts

	// What the machine reported and was left out of its facts is said first.
	for _, warning := range in.Platform.GetWarnings() {
		out.Warnings = append(out.Warnings, "Talos facts: "+warning)
	}

	for _, warning := range in.Addresses.GetWarnings() {
		out.Warnings = append(out.Warnings, "Talos addresses: "+warning)
	}

	warn := func(w string) { out.Warnings = append(out.Warnings, w) }

	// LoadBalancer IPs of the config's pools that the machine announces are Services', not its own.
	own := nodeaddress.OwnAddresses(in.Addresses, in.Config.GetLoadBalancer())

	chosen := nodeaddress.Choose(in.NodeName, in.Node, pm, own, in.Config.GetPreferIpv6(), hostnameOrigin, applied.PublicIPDiscovery, warn)
	out.Addresses = make([]*specs.NodeAddress, 0, len(chosen))
	out.AddressOrigins = make([]string, 0, len(chosen))

	for _, a := range chosen {
		out.Addresses = append(out.Addresses, a.Address)
		out.AddressOrigins = append(out.AddressOrigins, a.Origin)
	}

	setLabels(out, pm, in.Config, applied.Origins)
	setRuleOutputs(out, applied)

	requeue := setProviderID(out, in, pm, applied.Origins)

	if conflict := providerIDConflict(in.Node, out.GetProviderId()); conflict != "" {
		if in.Node.GetUninitialized() {
			Refuse(out, conflict)

			return out, 0
		}

		// An initialized Node keeps what its own machine gives, but the providerID it carries is no claim
		// (claimOf): it may be another machine's, whose Node must still get it.
		addConflict(out, conflict+": the Node holds no claim on it")
	}

	switch {
	case out.Pending != "":
	case !hasAddressType(out.Addresses, nodeaddress.AddressInternalIP):
		out.Pending = "no InternalIP: no provided-node-ip or Node address is an address of the machine, and Talos gave no node IP"
	default:
		out.Initialize = true
	}

	return out, requeue
}

// fact is a fact of the platform metadata that a label or the providerID comes from, with its origin key and
// its origin when no rule overrode it, built once: every Node's build names them.
type fact struct {
	name, key, talos string
}

func newFact(name string) fact {
	return fact{name: name, key: node.OriginKey(node.OriginKindPlatformMetadata, name), talos: "Talos platformMetadata." + name}
}

var (
	factRegion       = newFact("region")
	factZone         = newFact("zone")
	factInstanceType = newFact("instanceType")
	factSpot         = newFact("spot")
	factProviderID   = newFact("providerID")
)

// factOrigin names where a fact comes from: Talos, or the rule that overrode it.
func factOrigin(ruleOrigins map[string]string, f fact) string {
	if rule, ok := ruleOrigins[f.key]; ok {
		return rule + " (platformMetadata." + f.name + ")"
	}

	return f.talos
}

func setLabels(out *specs.NodeTransformSpec, pm *specs.PlatformMetadataSpec, cfg *specs.ConfigSpec, ruleOrigins map[string]string) {
	set := func(key, value, origin string) {
		if value == "" {
			return
		}

		if !kubenames.IsLabelValue(value) {
			if errs := validation.IsValidLabelValue(value); len(errs) > 0 {
				out.Warnings = append(out.Warnings, fmt.Sprintf("label %s: value %q from %s left out: %s", key, value, origin, errs[0]))

				return
			}
		}

		out.Labels[key] = value
		out.Origins[node.OriginKey(node.OriginKindLabel, key)] = origin
	}

	set(kubekeys.LabelRegion, pm.GetRegion(), factOrigin(ruleOrigins, factRegion))
	set(kubekeys.LabelZone, pm.GetZone(), factOrigin(ruleOrigins, factZone))
	set(kubekeys.LabelInstanceType, pm.GetInstanceType(), factOrigin(ruleOrigins, factInstanceType))

	if !cfg.GetDisableBetaTopologyLabels() {
		set(kubekeys.LabelBetaRegion, pm.GetRegion(), factOrigin(ruleOrigins, factRegion))
		set(kubekeys.LabelBetaZone, pm.GetZone(), factOrigin(ruleOrigins, factZone))
		set(kubekeys.LabelBetaInstanceType, pm.GetInstanceType(), factOrigin(ruleOrigins, factInstanceType))
	}

	if pm.GetHasPlatformMetadata() {
		set(kubekeys.LabelPlatform, out.GetPlatform(), "Talos platformMetadata.platform")
	} else {
		set(kubekeys.LabelPlatform, out.GetPlatform(), "no Talos PlatformMetadata: assumed "+fallbackPlatform)
	}

	if pm.GetSpot() {
		set(kubekeys.LabelLifecycle, "spot", factOrigin(ruleOrigins, factSpot))
	}

	clusterNameSource := cfg.GetClusterNameSource()
	if clusterNameSource == "" {
		clusterNameSource = cfg.GetSource()
	}

	set(kubekeys.LabelClusterName, cfg.GetClusterName(), "cluster name ("+clusterNameSource+")")
}

// setRuleOutputs adds what the transformation rules produced: labels (over the well-known ones: later keys
// win), annotations, taints, and the record of matched and skipped rules.
func setRuleOutputs(out *specs.NodeTransformSpec, applied rules.Result) {
	for k, v := range applied.Labels {
		out.Labels[k] = v
	}

	if len(applied.Annotations) > 0 {
		out.Annotations = applied.Annotations
	}

	for _, k := range slices.Sorted(maps.Keys(applied.Taints)) {
		out.Taints = append(out.Taints, applied.Taints[k])
	}

	for k, origin := range applied.Origins {
		out.Origins[k] = origin
	}

	out.MatchedRules = applied.Matched
	out.SkippedRules = applied.Skipped
}

// setProviderID picks the providerID: Talos's own, or the talos://<platform>/<ip> fallback, which is
// written only where no authoritative ID will come (metal, nocloud, no PlatformMetadata) or once the wait for
// one has run out. providerID is immutable on a Node, so a premature fallback could never be corrected.
func setProviderID(out *specs.NodeTransformSpec, in Input, pm *specs.PlatformMetadataSpec, ruleOrigins map[string]string) time.Duration {
	if id := pm.GetProviderId(); id != "" {
		out.ProviderId = id
		out.Origins[node.OriginProviderID] = factOrigin(ruleOrigins, factProviderID)

		return 0
	}

	fallback := func(origin string) {
		ip := ""

		for _, a := range out.GetAddresses() {
			if a.GetType() == nodeaddress.AddressInternalIP {
				ip = a.GetAddress()

				break
			}
		}

		if ip == "" {
			return
		}

		out.ProviderId = "talos://" + out.GetPlatform() + "/" + ip
		out.Origins[node.OriginProviderID] = origin
	}

	if !pm.GetHasPlatformMetadata() || !talos.PlatformHasProviderID(pm.GetPlatform()) {
		fallback("fallback: platform " + out.GetPlatform() + " has no providerID in Talos")

		return 0
	}

	wait := time.Duration(in.Config.GetProviderIdWaitSeconds()) * time.Second
	created := in.Node.GetCreated().AsTime()
	deadline := created.Add(wait)

	if in.Node.GetCreated() != nil && !in.Now.Before(deadline) {
		fallback(fmt.Sprintf("fallback: no providerID from Talos platform %s within %s", pm.GetPlatform(), wait))

		return 0
	}

	out.Pending = fmt.Sprintf("waiting for the providerID from Talos platform %s metadata (fallback at %s)", pm.GetPlatform(), deadline.UTC().Format(time.RFC3339))

	if in.Node.GetCreated() == nil {
		return wait
	}

	return deadline.Sub(in.Now)
}

func hasAddressType(addrs []*specs.NodeAddress, typ string) bool {
	for _, a := range addrs {
		if a.GetType() == typ {
			return true
		}
	}

	return false
}

package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// Protected label keys. The selectors and the template values of transformation rules read facts that
// the machine itself reports (its hostname, its PlatformMetadata tags, its SMBIOS strings...). A rule
// that turns such facts into a label the NodeRestriction admission plugin keeps from kubelets would hand
// a compromised machine what NodeRestriction refuses its kubelet: a machine reporting the right tag
// could give itself node-role.kubernetes.io/control-plane and attract the workloads meant for the
// control plane. So rules may write those keys only where the config lists them, one by one, in the
// rule's allowProtectedLabels.
//
// The protected set mirrors NodeRestriction as of Kubernetes 1.36
// (plugin/pkg/admission/noderestriction, getForbiddenLabels, with k8s.io/kubelet/pkg/apis.IsKubeletLabel):
//   - every key in the node-restriction.kubernetes.io namespace or in a subdomain of it
//     (*.node-restriction.kubernetes.io), the namespace meant for labels that only administrators set;
//   - every other key in the kubernetes.io, *.kubernetes.io, k8s.io and *.k8s.io namespaces that is not
//     a kubelet label, which covers node-role.kubernetes.io/* and talos-ccm's own
//     node.cloudprovider.kubernetes.io/* labels. Kubelet labels are the keys kubernetes.io/hostname,
//     topology.kubernetes.io/zone and region, failure-domain.beta.kubernetes.io/zone and region,
//     node.kubernetes.io/instance-type, beta.kubernetes.io/instance-type, kubernetes.io/os and arch,
//     beta.kubernetes.io/os and arch, and the namespaces [*.]kubelet.kubernetes.io and
//     [*.]node.kubernetes.io;
//   - and kubernetes.io/hostname, although a kubelet may set it: it names the Node, and workloads pinned
//     to one Node select it, so a rule computing it from facts would let one machine take another's
//     name.

// labelHostname is the one kubelet label that is protected all the same.
const labelHostname = corev1.LabelHostname

// kubeletLabels are the keys NodeRestriction lets a kubelet set in the kubernetes.io and k8s.io
// namespaces (k8s.io/kubelet/pkg/apis.KubeletLabels).
var kubeletLabels = []string{
	corev1.LabelHostname,
	corev1.LabelTopologyZone,
	corev1.LabelTopologyRegion,
	corev1.LabelFailureDomainBetaZone,
	corev1.LabelFailureDomainBetaRegion,
	corev1.LabelInstanceType,
	corev1.LabelInstanceTypeStable,
	corev1.LabelOSStable,
	corev1.LabelArchStable,
	"beta.kubernetes.io/os",
	"beta.kubernetes.io/arch",
}

// kubeletLabelNamespaces are the namespaces NodeRestriction lets a kubelet set, subdomains included
// (k8s.io/kubelet/pkg/apis.KubeletLabelNamespaces).
var kubeletLabelNamespaces = []string{corev1.LabelNamespaceSuffixKubelet, corev1.LabelNamespaceSuffixNode}

// inNamespace reports whether the label namespace ns is domain or a subdomain of it.
func inNamespace(ns, domain string) bool {
	return ns == domain || strings.HasSuffix(ns, "."+domain)
}

// IsProtectedLabel reports whether a rule may write the label key only where its allowProtectedLabels
// lists it. Keys compare as NodeRestriction compares them, case-sensitively (a valid label key has a
// lowercase namespace).
func IsProtectedLabel(key string) bool {
	ns, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}

	switch {
	case key == labelHostname:
		return true
	case inNamespace(ns, corev1.LabelNamespaceNodeRestriction):
		return true
	case !inNamespace(ns, "kubernetes.io") && !inNamespace(ns, "k8s.io"):
		return false
	case slices.Contains(kubeletLabels, key):
		return false
	}

	return !slices.ContainsFunc(kubeletLabelNamespaces, func(allowed string) bool { return inNamespace(ns, allowed) })
}

// ValidateProtectedLabel refuses a protected label key that allowed does not list.
func ValidateProtectedLabel(key string, allowed []string) error {
	if !IsProtectedLabel(key) || slices.Contains(allowed, key) {
		return nil
	}

	return fmt.Errorf("label key %q is protected: the NodeRestriction admission plugin keeps it from kubelets, "+
		"and a rule that writes it from a machine's own facts would let a compromised machine give it to itself "+
		"(list it in the rule's allowProtectedLabels to write it anyway)", key)
}

// ValidateAllowedProtectedLabel checks an entry of a rule's allowProtectedLabels: a protected label key that
// the rule writes (labels holds the rule's label keys).
func ValidateAllowedProtectedLabel(key string, labels map[string]string) error {
	if err := ValidateLabelKey(key); err != nil {
		return err
	}

	if !IsProtectedLabel(key) {
		return fmt.Errorf("label key %q is not protected: rules may write it without allowProtectedLabels", key)
	}

	if _, ok := labels[key]; !ok {
		return fmt.Errorf("the rule writes no label %q", key)
	}

	return nil
}

// ProtectedLabelWarnings explains why a rule that writes opted-in protected labels may still let a machine
// choose them: its nodeSelector, or the values it writes, come from facts the machine reports. A rule that
// writes no protected label, or writes fixed values on every node, gets no warning.
func ProtectedLabelWarnings(rule *specs.TransformationRule) []string {
	var keys []string

	for _, k := range slices.Sorted(maps.Keys(rule.GetLabels())) {
		if IsProtectedLabel(k) && slices.Contains(rule.GetAllowProtectedLabels(), k) {
			keys = append(keys, k)
		}
	}

	if len(keys) == 0 {
		return nil
	}

	var warnings []string

	for _, k := range keys {
		if fields := TemplateFacts(rule.GetLabels()[k]); len(fields) > 0 {
			warnings = append(warnings, fmt.Sprintf("protected label %q takes its value from facts the machine reports (%s): "+
				"a compromised machine chooses it", k, strings.Join(fields, ", ")))
		}
	}

	quoted, verb := "protected label "+strings.Join(quoteAll(keys), ", "), "is"
	if len(keys) > 1 {
		quoted, verb = "protected labels "+strings.Join(quoteAll(keys), ", "), "are"
	}

	if selected := selectorFacts(rule.GetNodeSelector()); len(selected) > 0 {
		warnings = append(warnings, fmt.Sprintf("%s %s written on the nodes its nodeSelector picks from facts "+
			"the machine reports (%s): a compromised machine can report them to get the label", quoted, verb, strings.Join(selected, ", ")))
	}

	var templated []string

	for _, section := range []struct {
		name   string
		values map[string]string
	}{{"labels", rule.GetLabels()}, {"annotations", rule.GetAnnotations()}, {"taints", rule.GetTaints()}} {
		for _, k := range slices.Sorted(maps.Keys(section.values)) {
			if section.name == "labels" && slices.Contains(keys, k) {
				continue // Warned about above.
			}

			if len(TemplateFacts(section.values[k])) > 0 {
				templated = append(templated, fmt.Sprintf("%s[%q]", section.name, k))
			}
		}
	}

	if len(templated) > 0 {
		warnings = append(warnings, fmt.Sprintf("the rule writes %s and renders %s from facts the machine reports: "+
			"keep rules that grant protected labels free of machine-chosen values", quoted, strings.Join(templated, ", ")))
	}

	return warnings
}

// selectorFacts lists the facts a nodeSelector tests, each once, in order.
func selectorFacts(terms []*specs.NodeSelectorTerm) []string {
	var out []string

	for _, term := range terms {
		for _, req := range term.GetMatchExpressions() {
			if !slices.Contains(out, req.GetKey()) {
				out = append(out, req.GetKey())
			}
		}
	}

	return out
}

func quoteAll(in []string) []string {
	out := make([]string, len(in))

	for i, s := range in {
		out[i] = fmt.Sprintf("%q", s)
	}

	return out
}

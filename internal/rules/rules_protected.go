package rules

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// Protected label keys are the keys the NodeRestriction admission plugin keeps kubelets from writing on
// their own Node. Rules may write them, as the Talos CCM's rules do (node-role.kubernetes.io/web by
// hostname is the most common rule of all): a rule is the operator's, and the facts it reads (selectors
// and template values) come from the machine's Talos API, which a kubelet credential cannot write;
// selectors and templates never read the Node's labels. What protection means is for the workloads: a
// Node carries such a label only because talos-ccm or an administrator put it there, never because its
// kubelet asked, and its kubelet cannot remove it either. `ccmctl config validate` says so for each
// protected key a rule writes, and the Node writer removes such keys only where it recorded them as its own
// in its state (k8ssink.OwnedKeys), never on the strength of the Node's annotations.
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
//     to one Node select it.

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
	kubekeys.LabelBetaOS,
	kubekeys.LabelBetaArch,
}

// kubeletLabelNamespaces are the namespaces NodeRestriction lets a kubelet set, subdomains included
// (k8s.io/kubelet/pkg/apis.KubeletLabelNamespaces).
var kubeletLabelNamespaces = []string{corev1.LabelNamespaceSuffixKubelet, corev1.LabelNamespaceSuffixNode}

// inNamespace reports whether the label namespace ns is domain or a subdomain of it.
func inNamespace(ns, domain string) bool {
	return ns == domain || strings.HasSuffix(ns, "."+domain)
}

// IsProtectedLabel reports whether the label key is one that NodeRestriction keeps from kubelets (or
// kubernetes.io/hostname). Keys compare as NodeRestriction compares them, case-sensitively (a valid label
// key has a lowercase namespace).
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

// ProtectedLabelNotes says, for the protected label keys a rule writes, what their protection means for the
// workloads that select on them. They are information for the operator, never a reason to refuse the rule.
func ProtectedLabelNotes(rule *specs.TransformationRule) []string {
	var notes []string

	for _, k := range slices.Sorted(maps.Keys(rule.GetLabels())) {
		switch {
		case k == labelHostname:
			notes = append(notes, fmt.Sprintf("label %q names the Node: workloads pinned to one Node select it, "+
				"and the kubelet sets it too, so a rule that writes another value than the kubelet's moves those workloads", k))
		case IsProtectedLabel(k):
			notes = append(notes, fmt.Sprintf("label %q is protected by NodeRestriction: no kubelet can set or remove it on its "+
				"own Node, so workloads that select on it run only on the Nodes this rule (or an administrator) labels", k))
		}
	}

	return notes
}

package kube

import (
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// MirrorNode extracts from a Node the parts talos-ccm decides from.
func MirrorNode(node *corev1.Node) *specs.KubeNodeSpec {
	spec := &specs.KubeNodeSpec{
		Uid:        string(node.UID),
		ProviderId: node.Spec.ProviderID,
		Labels:     node.Labels,
		Created:    timestamppb.New(node.CreationTimestamp.Time),
		PodCidrs:   node.Spec.PodCIDRs,
	}

	if v := node.Annotations[kubekeys.AnnotationProvidedNodeIP]; v != "" {
		for ip := range strings.SplitSeq(v, ",") {
			if ip = strings.TrimSpace(ip); ip != "" {
				spec.ProvidedNodeIps = append(spec.ProvidedNodeIps, ip)
			}
		}
	}

	for _, t := range node.Spec.Taints {
		spec.Taints = append(spec.Taints, &specs.Taint{Key: t.Key, Value: t.Value, Effect: string(t.Effect)})

		if t.Key == kubekeys.TaintUninitialized {
			spec.Uninitialized = true
		}
	}

	for _, a := range node.Status.Addresses {
		spec.Addresses = append(spec.Addresses, &specs.NodeAddress{Type: string(a.Type), Address: a.Address})
	}

	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			spec.Ready = c.Status == corev1.ConditionTrue

			if !c.LastTransitionTime.IsZero() {
				spec.ReadyChanged = timestamppb.New(c.LastTransitionTime.Time)
			}
		}
	}

	return spec
}

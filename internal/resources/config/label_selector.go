package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// LabelSelector converts a config label selector to the Kubernetes type.
func LabelSelector(sel *specs.LabelSelector) *metav1.LabelSelector {
	out := &metav1.LabelSelector{MatchLabels: sel.GetMatchLabels()}

	for _, e := range sel.GetMatchExpressions() {
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
			Key: e.GetKey(), Operator: metav1.LabelSelectorOperator(e.GetOperator()), Values: e.GetValues(),
		})
	}

	return out
}

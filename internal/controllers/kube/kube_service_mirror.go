package kube

import (
	"maps"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"
	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

// ServiceID is the ID of the KubeService of a Service.
func ServiceID(namespace, name string) string {
	return namespace + "/" + name
}

// MirrorService extracts from a Service of type LoadBalancer the parts talos-ccm decides from.
func MirrorService(svc *corev1.Service) *specs.KubeServiceSpec {
	spec := &specs.KubeServiceSpec{
		Uid:            string(svc.UID),
		Namespace:      svc.Namespace,
		Name:           svc.Name,
		Labels:         maps.Clone(svc.Labels),
		LoadBalancerIp: svc.Spec.LoadBalancerIP, // Deprecated by Kubernetes, still honoured.
		Created:        timestamppb.New(svc.CreationTimestamp.Time),
		Selector:       maps.Clone(svc.Spec.Selector),

		ExternalTrafficPolicy: string(svc.Spec.ExternalTrafficPolicy),
	}

	if svc.Spec.LoadBalancerClass != nil {
		spec.LoadBalancerClass = *svc.Spec.LoadBalancerClass
	}

	for k, v := range svc.Annotations {
		// The IP requests of MetalLB and Cilium too: the LoadBalancer IP planner reads them when the config
		// file says so, for a migration without renumbering.
		if strings.HasPrefix(k, kubekeys.ServiceAnnotationPrefix) || k == kubekeys.AnnotationMetalLBIPs || k == kubekeys.AnnotationCiliumIPs {
			if spec.Annotations == nil {
				spec.Annotations = map[string]string{}
			}

			spec.Annotations[k] = v
		}
	}

	for _, f := range svc.Spec.IPFamilies {
		spec.IpFamilies = append(spec.IpFamilies, string(f))
	}

	if svc.Spec.IPFamilyPolicy != nil {
		spec.IpFamilyPolicy = string(*svc.Spec.IPFamilyPolicy)
	}

	for _, p := range svc.Spec.Ports {
		spec.Ports = append(spec.Ports, &specs.ServicePort{Protocol: string(p.Protocol), Port: p.Port})
	}

	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			spec.IngressIps = append(spec.IngressIps, ing.IP)
		}
	}

	// talos-ccm's condition as the Service shows it: when someone else removes or changes it, the mirror
	// changes, and the LoadBalancer sink writes it back.
	for _, c := range svc.Status.Conditions {
		if c.Type == kubekeys.ConditionLoadBalancerIPAllocated {
			spec.Condition = &specs.ServiceCondition{Status: string(c.Status), Reason: c.Reason, Message: c.Message}
		}
	}

	return spec
}

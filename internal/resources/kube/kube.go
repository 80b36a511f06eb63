// Package kube holds the resources that mirror Kubernetes objects, written by the informers.
package kube

import "github.com/cosi-project/runtime/pkg/resource"

// NamespaceName is the default namespace of the kube group.
const NamespaceName resource.Namespace = "kube"

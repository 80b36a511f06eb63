// Package csr holds the decisions about kubelet serving certificate requests.
package csr

import "github.com/cosi-project/runtime/pkg/resource"

// NamespaceName is the default namespace of the csr group.
const NamespaceName resource.Namespace = "csr"

// Package node holds the decisions about Kubernetes Nodes.
package node

import "github.com/cosi-project/runtime/pkg/resource"

// NamespaceName is the default namespace of the node group.
const NamespaceName resource.Namespace = "node"

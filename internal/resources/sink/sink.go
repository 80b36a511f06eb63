// Package sink holds what the sinks applied to Kubernetes.
package sink

import "github.com/cosi-project/runtime/pkg/resource"

// NamespaceName is the default namespace of the sink group.
const NamespaceName resource.Namespace = "sink"

// Package talos holds the facts read from each machine's Talos API, written by the Talos source.
package talos

import "github.com/cosi-project/runtime/pkg/resource"

// NamespaceName is the default namespace of the talos group.
const NamespaceName resource.Namespace = "talos"

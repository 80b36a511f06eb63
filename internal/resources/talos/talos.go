// Package talos holds the facts read from each machine's Talos API, written by the Talos source.
package talos

import "github.com/cosi-project/runtime/pkg/resource"

// NamespaceName is the default namespace of the talos group.
const NamespaceName resource.Namespace = "talos"

// Bounds on one machine's facts, so that a misbehaving or hostile machine, or a host's facts, cannot make
// talos-ccm hold or write unbounded data: the Talos source leaves out what a machine reports beyond them
// (with a warning in the facts), and the facts adapter (pkg/ccm/factsv1) refuses a host's machine beyond
// them.
const (
	MaxTags        = 256
	MaxFieldLength = 1024
	MaxAddresses   = 512
)

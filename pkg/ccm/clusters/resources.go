package clusters

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"

	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/host"
)

// Cluster and ClusterStatus are the host's resources of a Controller.
type (
	// Cluster declares a cluster to serve; its ID is the cluster's ID. Its spec is a specs.ClusterSpec.
	Cluster = host.Cluster
	// ClusterStatus is the health of a cluster's pipeline; its ID is the cluster's ID. Its spec is a
	// specs.ClusterStatusSpec.
	ClusterStatus = host.ClusterStatus
)

// Types and default namespace of the host's resources of a Controller.
const (
	ClusterType       = host.ClusterType
	ClusterStatusType = host.ClusterStatusType
	// DefaultNamespace is the default namespace of Cluster and ClusterStatus resources.
	DefaultNamespace = host.NamespaceName
)

// NewCluster returns an empty Cluster of the given ID in the namespace ns.
func NewCluster(ns resource.Namespace, id resource.ID) *Cluster {
	return host.NewCluster(ns, id)
}

// NewClusterStatus returns an empty ClusterStatus of the given ID in the namespace ns: a pointer to read one.
func NewClusterStatus(ns resource.Namespace, id resource.ID) *ClusterStatus {
	return host.NewClusterStatus(ns, id)
}

// NamespacePrefixSeparator ends every namespace prefix: the prefix "cluster-a:" stores the namespace "talos"
// as "cluster-a:talos" in the host's state. It is the separator Omni uses in its own parametrized
// namespaces, and it appears neither in talos-ccm's namespaces nor in a DNS label.
const NamespacePrefixSeparator = cosistate.NamespacePrefixSeparator

// ValidateNamespacePrefix checks a namespace prefix (a Cluster's namespacePrefix, or its ID followed by
// NamespacePrefixSeparator): a DNS label followed by NamespacePrefixSeparator, as in "cluster-a:".
func ValidateNamespacePrefix(prefix string) error {
	return cosistate.ValidateNamespacePrefix(prefix) //nolint:wrapcheck // It says what is wrong.
}

// HostNamespace returns the namespace that stores talos-ccm's namespace ns (such as ccm.TalosNamespace) in
// the host's state, for the cluster of the given prefix: prefix followed by ns. A host writes a cluster's
// facts into HostNamespace(prefix, ccm.TalosNamespace), and reads its decisions from the other namespaces.
func HostNamespace(prefix string, ns resource.Namespace) resource.Namespace {
	return cosistate.HostNamespace(prefix, ns)
}

// PrefixedNamespace is one namespace of a cluster's pipeline, as the host's state stores it.
type PrefixedNamespace = cosistate.PrefixedNamespace

// PrefixedNamespaces lists every namespace of the pipeline of the given prefix as the host's state stores
// it, with whether it should be persisted, so that the host's namespaced state builder can route each to a
// backend: persisted ones to a database, the others to memory (MemoryStateBuilder).
func PrefixedNamespaces(prefix string) ([]PrefixedNamespace, error) {
	return cosistate.PrefixedNamespaces(prefix) //nolint:wrapcheck // It says what is wrong.
}

// MemoryStateBuilder returns a builder of in-memory namespaces (for namespaced.NewState) whose watches are
// resumed when they fall behind their history, and whose reads share the stored resources instead of
// copying them: what a host's state builder should give the namespaces of PrefixedNamespaces, with its own
// options (inmem.WithBackingStore for the persisted ones) as extra.
func MemoryStateBuilder(extra ...inmem.StateOption) namespaced.StateBuilder {
	return cosistate.MemoryStateBuilder(extra...)
}

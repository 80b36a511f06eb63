package clusters

import (
	"context"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
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

// MemoryStateBuilder returns a builder of in-memory namespaces (for namespaced.NewState) whose reads share
// the stored resources instead of copying them, and whose watches cost no goroutine while idle and never
// fall behind (a watcher that lags is told of each resource as it is now): what a host's state builder
// should give the namespaces of PrefixedNamespaces, with inmem.WithBackingStore as extra for the persisted
// ones (the history options of the COSI runtime's in-memory state mean nothing here: these namespaces keep
// no history, and refuse watches from a bookmark or with tail events).
func MemoryStateBuilder(extra ...inmem.StateOption) namespaced.StateBuilder {
	return cosistate.MemoryStateBuilder(extra...)
}

// NamespaceReleaser is a host's state that can drop namespaces it no longer needs from memory. When the
// host's state given to NewController is one, the Controller releases the namespaces of a removed
// cluster's prefix (PrefixedNamespaces) once the cluster's pipeline stopped and its resources were
// destroyed: a namespaced.State never drops a namespace, so without it every cluster a host ever ran keeps
// its in-memory collections in the host's state. Namespaces of a cluster
// that keeps its resources (keepResources) are not released.
//
// HostState is one. A host with a state of its own (its own layers over namespaced.State) builds its
// namespaces with NewReleasableNamespaces instead of namespaced.NewState, and gives the state it hands to
// NewController a ReleaseNamespaces method that calls theirs.
type NamespaceReleaser interface {
	// ReleaseNamespaces drops the given namespaces once nothing is stored in them and nobody watches them
	// (at once, or when their last watch ends); a namespace written again meanwhile keeps what was written.
	ReleaseNamespaces(ctx context.Context, namespaces []resource.Namespace) error
}

// ReleasableNamespaces is a state split by namespace (the host's namespaced.State), whose namespace ns is
// what its builder returns for ns, and whose namespaces can be released: a released namespace is dropped,
// with everything it holds, once it is empty and unwatched; used again, it is built afresh.
type ReleasableNamespaces = cosistate.ReleasableNamespaces

// NewReleasableNamespaces returns a state whose namespace ns is builder(ns) (as namespaced.NewState does),
// whose namespaces can be released: what a host's state should split its namespaces with, so that a
// removed cluster's go (see NamespaceReleaser).
func NewReleasableNamespaces(builder namespaced.StateBuilder) *ReleasableNamespaces {
	return cosistate.NewReleasableNamespaces(builder)
}

// HostState is a host's state split by namespace whose namespaces are released when a cluster is removed
// (a NamespaceReleaser): state.WrapCore over ReleasableNamespaces.
type HostState struct {
	state.State

	namespaces *ReleasableNamespaces
}

// NewHostState returns a host's state whose namespace ns is builder(ns), such as MemoryStateBuilder's, in
// place of state.WrapCore(namespaced.NewState(builder)): given to NewController, it gives the memory of the
// namespaces of a removed cluster back.
func NewHostState(builder namespaced.StateBuilder) *HostState {
	namespaces := NewReleasableNamespaces(builder)

	return &HostState{State: state.WrapCore(namespaces), namespaces: namespaces}
}

// ReleaseNamespaces implements NamespaceReleaser.
func (s *HostState) ReleaseNamespaces(ctx context.Context, namespaces []resource.Namespace) error {
	return s.namespaces.ReleaseNamespaces(ctx, namespaces) //nolint:wrapcheck // It says what failed.
}

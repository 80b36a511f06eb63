// Package host holds the resources of a host that embeds talos-ccm for several clusters: the clusters it
// declares (Cluster) and their pipelines' health (ClusterStatus). They live in the host's own namespace,
// never in a cluster's prefixed namespaces, and are not part of a pipeline's resources (internal/resources).
package host

import (
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
)

// NamespaceName is the default namespace of the host's cluster resources.
const NamespaceName resource.Namespace = "talos-ccm"

// All returns an empty resource of every host type.
func All() []meta.ResourceWithRD {
	return []meta.ResourceWithRD{&Cluster{}, &ClusterStatus{}}
}

// Package hostapi is the HTTP API between make bench-clusters and the host process it measures
// (test/benchclusters/host): the clusters it declares, and the counters it reads.
package hostapi

import (
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// Paths of the host's API. POST ClustersPath takes []Cluster and declares them; DELETE ClustersPath takes
// []string (cluster IDs; none: every cluster) and answers once they are all removed; GET StatsPath answers
// Stats, after a garbage collection with the query GC, and with the goroutine descriptors the host keeps
// counted with the query Descriptors.
const (
	ClustersPath = "/clusters"
	StatsPath    = "/stats"
	GC           = "gc=1"
	Descriptors  = "descriptors=1"
)

// Cluster is one cluster the bench declares.
type Cluster struct {
	// ID is the Cluster's ID.
	ID string `json:"id"`
	// APIServer is the index of the cluster's apiserver in the host's --kubeconfigs.
	APIServer int `json:"apiserver"`
	// NodeSelector selects the cluster's Nodes on its apiserver (ClusterSpec.nodeSelector).
	NodeSelector string `json:"nodeSelector"`
	// Machines are the cluster's machines, which the host feeds through factsv1.
	Machines []factsv1.Machine `json:"machines"`
}

// Stats are the host's counters.
type Stats struct {
	// Goroutines is the host's goroutine count.
	Goroutines int `json:"goroutines"`
	// KeptDescriptors, with the query Descriptors, is the count of goroutine descriptors the host keeps: the
	// Go runtime keeps the descriptor of each goroutine of its peak, for reuse, in the heap, for the life of
	// the process (descriptors.Kept; the count leaves the probe's own descriptors behind).
	KeptDescriptors int `json:"keptDescriptors,omitempty"`
	// HeapAlloc is the bytes of the heap's objects (live ones only after a collection).
	HeapAlloc uint64 `json:"heapAlloc"`
	// Clusters are the clusters of the host's inventory; Statuses the ClusterStatus resources, Running those
	// of them that say running.
	Clusters int `json:"clusters"`
	Statuses int `json:"statuses"`
	Running  int `json:"running"`
	// StatusWrites counts the ClusterStatus writes (created or updated) since the host started.
	StatusWrites int64 `json:"statusWrites"`
}

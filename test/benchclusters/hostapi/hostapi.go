// Package hostapi is the HTTP API between make bench-clusters and the host process it measures
// (test/benchclusters/host): the clusters it declares, and the counters it reads.
package hostapi

import (
	"time"

	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// Paths of the host's API. POST ClustersPath takes []Cluster and declares them; DELETE ClustersPath takes
// []string (cluster IDs; none: every cluster) and answers once they are all removed; GET StatsPath answers
// Stats, after a garbage collection with the query GC, and with the query PeakOff or PeakOn, once the host
// stopped or started again counting its goroutines every PeakInterval.
const (
	ClustersPath = "/clusters"
	StatsPath    = "/stats"
	GC           = "gc=1"
	PeakOff      = "peak=off"
	PeakOn       = "peak=on"
)

// PeakInterval is how often the host counts its goroutines for Stats.PeakGoroutines: the goroutines of
// clusters that start rise and fall over seconds. The counts wake the host ten times a second, a tenth of
// a percent of a core that is no cluster's: the bench stops them over the idle window (PeakOff), when no
// cluster starts or stops.
const PeakInterval = 100 * time.Millisecond

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
	// Goroutines is the host's goroutine count; PeakGoroutines the most it counted since it started, every
	// PeakInterval and at each Stats: the Go runtime keeps a descriptor of each goroutine of its peak for
	// reuse, in the heap, for the life of the process.
	Goroutines     int `json:"goroutines"`
	PeakGoroutines int `json:"peakGoroutines"`
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

package metrics

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// IPPoolFigures are the figures of one address pool that the talos_ccm_ippool_* metrics show.
type IPPoolFigures struct {
	// Pool is the ID of the IPPool (lb/NAME/FAMILY, pod/FAMILY); empty for the allocations no pool refused.
	Pool string
	// Size, Used and Free count blocks: IPs in a LoadBalancer pool, pod CIDRs in a cluster range.
	Size, Used, Free uint64
	// Refused counts the allocations that are refused now.
	Refused int
	// Counted says that the pool exists, so that its size, use and free blocks are shown.
	Counted bool
}

// The talos_ccm_ippool_* metrics, by pool.
var (
	ipPoolSizeDesc = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "ippool", "size"),
		"Blocks of an address pool (IPs of a LoadBalancer pool, pod CIDRs of a cluster range), not counting excluded ones.", []string{"pool"}, nil)
	ipPoolInUseDesc = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "ippool", "in_use"),
		"Blocks of an address pool that are held.", []string{"pool"}, nil)
	ipPoolFreeDesc = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "ippool", "free"),
		"Blocks of an address pool that can be handed out.", []string{"pool"}, nil)
	ipPoolRefusedDesc = prometheus.NewDesc(prometheus.BuildFQName(Namespace, "ippool", "refused_allocations"),
		"Allocations refused now (a Service or Node without its address), by the pool that refused them (an exhausted pool counts every Service it left without an IP); "+
			`pool="" for those no pool refused: no pool matches, or a requested IP is outside the pools.`,
		[]string{"pool"}, nil)
)

// ipPools shows the figures last set by SetIPPools; a scrape sees one set whole.
type ipPools struct {
	figures atomic.Pointer[[]IPPoolFigures]
}

var ipPoolCollector = &ipPools{}

func init() {
	Registry.MustRegister(ipPoolCollector)
}

// SetIPPools replaces the figures of every pool: a pool left out has no series any more.
func SetIPPools(figures []IPPoolFigures) {
	ipPoolCollector.figures.Store(&figures)
}

// Describe implements prometheus.Collector.
func (c *ipPools) Describe(ch chan<- *prometheus.Desc) {
	ch <- ipPoolSizeDesc
	ch <- ipPoolInUseDesc
	ch <- ipPoolFreeDesc
	ch <- ipPoolRefusedDesc
}

// Collect implements prometheus.Collector.
func (c *ipPools) Collect(ch chan<- prometheus.Metric) {
	figures := c.figures.Load()
	if figures == nil {
		return
	}

	for _, f := range *figures {
		if f.Counted {
			ch <- prometheus.MustNewConstMetric(ipPoolSizeDesc, prometheus.GaugeValue, float64(f.Size), f.Pool)
			ch <- prometheus.MustNewConstMetric(ipPoolInUseDesc, prometheus.GaugeValue, float64(f.Used), f.Pool)
			ch <- prometheus.MustNewConstMetric(ipPoolFreeDesc, prometheus.GaugeValue, float64(f.Free), f.Pool)
		}

		ch <- prometheus.MustNewConstMetric(ipPoolRefusedDesc, prometheus.GaugeValue, float64(f.Refused), f.Pool)
	}
}

package ipam_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	ipamctrl "github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
)

func TestIPPoolFigures(t *testing.T) {
	t.Parallel()

	pools := map[string]*specs.IPPoolSpec{
		"lb/public/ipv4":            {Purpose: "load-balancer-ip", Size: 4, Used: 4, Free: 0},
		"lb/internal/ipv6":          {Purpose: "load-balancer-ip", Size: 256, Used: 1, Free: 255},
		"pod/ipv4":                  {Purpose: "pod-cidr", Size: 256, Used: 3, Free: 253},
		"node-prefix/2001:db8::/64": {Purpose: "node-prefix", Size: 65536, Used: 1, Free: 65535},
	}

	failed := []*specs.IPAllocationSpec{
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Pool: "lb/public/ipv4", Origin: "requested", Cause: "ip-rejected", RefusedPools: []string{"lb/public/ipv4"}, Reason: "the requested IP is held"},
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Cause: "pools-exhausted", RefusedPools: []string{"lb/public/ipv4", "lb/gone/ipv4"}, Reason: "every load balancer pool that matches the Service is exhausted (public, gone)"},
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv6", Cause: "pools-exhausted", RefusedPools: []string{"lb/internal/ipv6"}, Reason: "every load balancer pool that matches the Service is exhausted (internal)"},
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Cause: "no-pool-matches", Reason: "no load balancer pool of ipv4 matches the Service"},
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Origin: "requested", Cause: "ip-rejected", Reason: "the requested IP 192.0.2.1 is not in a load balancer pool that matches the Service (public)"},
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Cause: "dual-stack-incomplete", Reason: "RequireDualStack: no ipv6 IP: every load balancer pool that matches the Service is exhausted, public, (public)"},
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Cause: "dual-stack-incomplete", Reason: "RequireDualStack: the Service gets an IP of every family or none, and it gets no ipv6 IP: every load balancer pool that matches the Service is exhausted (public)"},
		{State: "failed", Purpose: "node-prefix", Family: "ipv6", Pool: "node-prefix/2001:db8::/64", Reason: "no segment left"},
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Pool: "lb/gone/ipv4", Reason: "the pool was removed since"},
	}

	assert.Equal(t, []metrics.IPPoolFigures{
		{Pool: "", Refused: 4},
		{Pool: "lb/gone/ipv4", Refused: 1},
		{Pool: "lb/internal/ipv6", Size: 256, Used: 1, Free: 255, Refused: 1, Counted: true},
		{Pool: "lb/public/ipv4", Size: 4, Used: 4, Free: 0, Refused: 2, Counted: true},
		{Pool: "pod/ipv4", Size: 256, Used: 3, Free: 253, Counted: true},
	}, ipamctrl.IPPoolFigures(pools, failed))
}

// TestIPPoolFiguresReadRefusedPools holds that the pools an allocation names in refusedPools count its
// refusal, whatever its reason says: the wording of a reason is for people.
func TestIPPoolFiguresReadRefusedPools(t *testing.T) {
	t.Parallel()

	pools := map[string]*specs.IPPoolSpec{
		"lb/a/ipv4": {Purpose: "load-balancer-ip", Size: 2, Used: 2},
		"lb/b/ipv4": {Purpose: "load-balancer-ip", Size: 2, Used: 2},
	}

	failed := []*specs.IPAllocationSpec{
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Cause: "pools-exhausted", RefusedPools: []string{"lb/a/ipv4", "lb/b/ipv4"}, Reason: "no free IP in a, b"},
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Cause: "pools-exhausted", RefusedPools: []string{"lb/gone/ipv4"}, Reason: "no free IP in gone"},
		{State: "failed", Purpose: "load-balancer-ip", Family: "ipv4", Cause: "no-pool-matches", Reason: "every load balancer pool that matches the Service is exhausted (a)"},
	}

	assert.Equal(t, []metrics.IPPoolFigures{
		{Pool: "", Refused: 2},
		{Pool: "lb/a/ipv4", Size: 2, Used: 2, Refused: 1, Counted: true},
		{Pool: "lb/b/ipv4", Size: 2, Used: 2, Refused: 1, Counted: true},
	}, ipamctrl.IPPoolFigures(pools, failed))
}

// poolRecorder is an IPPoolMetricsController's Record that hands every call on to the test.
type poolRecorder chan []metrics.IPPoolFigures

func (r poolRecorder) record(figures []metrics.IPPoolFigures) { r <- figures }

// next waits for the figures recorded next.
func (r poolRecorder) next(ctx context.Context, t *testing.T) []metrics.IPPoolFigures {
	t.Helper()

	select {
	case figures := <-r:
		return figures
	case <-ctx.Done():
		t.Fatal("no figures recorded")

		return nil
	}
}

// TestIPPoolMetricsPerPipeline: two pipelines in one process, each with its own pools, each record their
// own figures, never the other's, and nil once they stop.
func TestIPPoolMetricsPerPipeline(t *testing.T) {
	t.Parallel()

	type pipeline struct {
		suite    *ctest.Suite
		recorder poolRecorder
		want     []metrics.IPPoolFigures
	}

	pipelines := map[string]*pipeline{
		"alpha": {want: []metrics.IPPoolFigures{{Pool: "pod/ipv4", Size: 256, Used: 3, Free: 253, Counted: true}}},
		"beta":  {want: []metrics.IPPoolFigures{{Pool: "lb/public/ipv4", Size: 4, Used: 1, Free: 3, Counted: true}}},
	}

	for _, p := range pipelines {
		p.recorder = make(poolRecorder, 16)
		p.suite = ctest.New(t)
		p.suite.Register(&ipamctrl.IPPoolMetricsController{Record: p.recorder.record})
	}

	for _, p := range pipelines {
		p.suite.Start()

		pool := ipam.NewIPPool(ipam.NamespaceName, p.want[0].Pool)
		pool.TypedSpec().Value = &specs.IPPoolSpec{Size: p.want[0].Size, Used: p.want[0].Used, Free: p.want[0].Free}
		p.suite.Create(pool)
	}

	for name, p := range pipelines {
		ctx := p.suite.Ctx()

		// The controller may record before the pool is there: its figures are then those of no pool.
		got := p.recorder.next(ctx, t)
		if len(got) == 0 {
			got = p.recorder.next(ctx, t)
		}

		assert.Equal(t, p.want, got, "the figures of %s", name)
	}

	for name, p := range pipelines {
		p.suite.Stop()

		// Run has returned: whatever the controller recorded is in the channel.
		last := p.want
		for len(p.recorder) > 0 {
			last = <-p.recorder
		}

		assert.Nil(t, last, "%s records nil once it stops", name)
	}
}

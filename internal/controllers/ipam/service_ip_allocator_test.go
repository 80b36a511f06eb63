package ipam_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	ipamres "github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
)

// TestServiceIPAllocator runs the LoadBalancer IP allocator: once the Service mirror is complete, each
// Service gets a free IP of the config's pool, and a Service that is gone releases its IP.
func TestServiceIPAllocator(t *testing.T) {
	s := startServiceIPAllocator(t, &specs.LoadBalancerPoolConfig{Name: "default", Addresses: []string{"192.0.2.0-192.0.2.3"}})

	s.Create(service("prod", "web", 1))
	setSynced(s, kube.ServicesSyncID)

	web := ipamres.ServiceAllocationID("prod/web", ipamres.FamilyIPv4)

	ctest.AssertResource(s, web, func(res *ipamres.IPAllocation, a *assert.Assertions) {
		a.Equal(ipamres.StateAllocated, res.TypedSpec().Value.GetState())
		a.Equal("192.0.2.0", res.TypedSpec().Value.GetAddress())
		a.Equal("ipam.ServiceIPAllocatorController", res.Metadata().Owner())
	})

	s.Create(service("dev", "api", 2))

	api := ipamres.ServiceAllocationID("dev/api", ipamres.FamilyIPv4)

	ctest.AssertResource(s, api, func(res *ipamres.IPAllocation, a *assert.Assertions) {
		a.Equal("192.0.2.1", res.TypedSpec().Value.GetAddress())
	})

	ctest.Destroy[*kube.KubeService](s, "prod/web")
	ctest.AssertNoResource[*ipamres.IPAllocation](s, web)

	ctest.AssertResource(s, ipam.LoadBalancerPoolID("default", ipamres.FamilyIPv4), func(res *ipamres.IPPool, a *assert.Assertions) {
		a.Equal(uint64(4), res.TypedSpec().Value.GetSize())
		a.Equal(uint64(1), res.TypedSpec().Value.GetUsed())
	})
}

// startServiceIPAllocator runs the LoadBalancer IP allocator alone, with a config of the pools.
func startServiceIPAllocator(t *testing.T, pools ...*specs.LoadBalancerPoolConfig) *ctest.Suite {
	t.Helper()

	s := ctest.New(t, ctest.WithTimeout(time.Minute))
	s.Register(&ipam.ServiceIPAllocatorController{})
	s.Start()

	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value.LoadBalancer = &specs.LoadBalancerConfig{Pools: pools}
	s.Create(cfg)

	return s
}

// service is the mirror of a Service of type LoadBalancer without a class, age milliseconds younger than t0.
func service(namespace, name string, age int) *kube.KubeService {
	res := kube.NewKubeService(kube.NamespaceName, namespace+"/"+name)
	res.TypedSpec().Value = &specs.KubeServiceSpec{
		Namespace: namespace,
		Name:      name,
		Uid:       "uid-" + name,
		Created:   timestamppb.New(t0.Add(time.Duration(age) * time.Millisecond)),
	}

	return res
}

// TestServiceIPAllocatorNamespaceSelector: with a pool that selects namespaces by their labels, the allocator
// decides nothing until the Namespace mirror is complete (else the Service would get an IP of the pool for
// every namespace, and keep it), and a change of a namespace's labels re-decides its Services: one whose
// namespace stops matching keeps its IP, with the warning.
func TestServiceIPAllocatorNamespaceSelector(t *testing.T) {
	// In a bubble: synctest.Wait tells when the allocator is idle, to show that it decides nothing.
	synctest.Test(t, func(t *testing.T) {
		s := startServiceIPAllocator(t,
			&specs.LoadBalancerPoolConfig{
				Name: "team-a", Addresses: []string{"192.0.2.1-192.0.2.2"},
				NamespaceSelector: &specs.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
			},
			&specs.LoadBalancerPoolConfig{Name: "rest", Addresses: []string{"198.51.100.1-198.51.100.2"}},
		)

		s.Create(service("prod", "web", 1))
		setSynced(s, kube.ServicesSyncID)

		prod := kube.NewKubeNamespace(kube.NamespaceName, "prod")
		prod.TypedSpec().Value.Labels = map[string]string{"team": "a"}
		s.Create(prod)

		web := ipamres.ServiceAllocationID("prod/web", ipamres.FamilyIPv4)

		synctest.Wait()
		ctest.AssertNoResource[*ipamres.IPAllocation](s, web)

		setSynced(s, kube.NamespacesSyncID)

		ctest.AssertResource(s, web, func(res *ipamres.IPAllocation, a *assert.Assertions) {
			a.Equal("192.0.2.1", res.TypedSpec().Value.GetAddress())
			a.Empty(res.TypedSpec().Value.GetWarning())
		})

		ctest.Modify(s, prod, func(res *kube.KubeNamespace) error {
			res.TypedSpec().Value.Labels = map[string]string{"team": "b"}

			return nil
		})

		ctest.AssertResource(s, web, func(res *ipamres.IPAllocation, a *assert.Assertions) {
			a.Equal("192.0.2.1", res.TypedSpec().Value.GetAddress())
			a.Equal(ipamres.WarningOutsidePools, res.TypedSpec().Value.GetWarning())
		})
	})
}

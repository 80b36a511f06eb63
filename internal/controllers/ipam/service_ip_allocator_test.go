package ipam_test

import (
	"testing"
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
	s := ctest.New(t)
	s.Register(&ipam.ServiceIPAllocatorController{})
	s.Start()

	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value.LoadBalancer = &specs.LoadBalancerConfig{
		Pools: []*specs.LoadBalancerPoolConfig{{Name: "default", Addresses: []string{"192.0.2.0-192.0.2.3"}}},
	}

	s.Create(cfg, service("prod", "web", 1))
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

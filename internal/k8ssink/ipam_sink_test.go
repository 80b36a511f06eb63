package k8ssink_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
)

func TestDesiredPodCIDRs(t *testing.T) {
	t.Parallel()

	both := []string{"10.244.1.0/24", "fd00::/64"}
	v4 := &specs.IPAllocationSpec{State: "allocated", Address: "10.244.1.0/24", OwnerUid: "u1", NodePodCidrs: both}
	v6 := &specs.IPAllocationSpec{State: "allocated", Address: "fd00::/64", OwnerUid: "u1", NodePodCidrs: both}

	for _, tc := range []struct {
		name   string
		allocs []*specs.IPAllocationSpec
		uid    string
		want   []string
	}{
		{name: "complete", allocs: []*specs.IPAllocationSpec{v4, v6}, uid: "u1", want: both},
		{name: "single stack", allocs: []*specs.IPAllocationSpec{{State: "allocated", Address: "10.0.0.0/24", OwnerUid: "u1", NodePodCidrs: []string{"10.0.0.0/24"}}}, uid: "u1", want: []string{"10.0.0.0/24"}},
		{name: "another Node of the same name", allocs: []*specs.IPAllocationSpec{v4, v6}, uid: "u2"},
		{name: "a family missing", allocs: []*specs.IPAllocationSpec{v4}, uid: "u1"},
		{name: "a family failed", allocs: []*specs.IPAllocationSpec{v4, {State: "failed", OwnerUid: "u1"}}, uid: "u1"},
		{
			name: "allocations that disagree (a plan written halfway)", uid: "u1",
			allocs: []*specs.IPAllocationSpec{v4, {State: "allocated", Address: "fd00:0:0:1::/64", OwnerUid: "u1", NodePodCidrs: []string{"10.244.1.0/24", "fd00:0:0:1::/64"}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, k8ssink.DesiredPodCIDRs(tc.allocs, tc.uid))
		})
	}
}

func TestDesiredIngress(t *testing.T) {
	t.Parallel()

	allocs := []*specs.IPAllocationSpec{
		{State: "allocated", Address: "2001:db8::1", OwnerUid: "u1"},
		{State: "failed", OwnerUid: "u1", Reason: "no pool"},
		{State: "allocated", Address: "192.0.2.1", OwnerUid: "u1"},
	}

	assert.Equal(t, []string{"2001:db8::1", "192.0.2.1"}, k8ssink.DesiredIngress(allocs, "u1"))
	assert.Empty(t, k8ssink.DesiredIngress(allocs, "u2"), "a re-created Service gets nothing of the old one's")
}

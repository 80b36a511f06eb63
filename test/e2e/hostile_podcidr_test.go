package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestAttackKubeletPodCIDR: a kubelet credential registers its Node with spec.podCIDRs set to the whole /16
// cluster range (NodeRestriction lets a kubelet set them when it creates its Node). The claim is refused:
// it reserves nothing, the Node is reported in conflict (its IPAllocation, the pool's Conflict condition and
// a PodCIDRConflict Event) with the reason that spec.podCIDRs cannot be changed, and the Nodes that join
// afterwards get their blocks out of that /16.
func TestAttackKubeletPodCIDR(t *testing.T) {
	const hostile = "hpodcidr-hostile"

	machines := fleet("hpodcidr", 6, 71)
	_, srv := talossim.StartTest(t, machines)

	socket := filepath.Join(socketDir(t), "ccm.sock")

	// The range is given by flag, so that it is known before any machine reports it.
	startCCM(t, srv, app.Options{AllocateNodeCIDRs: true, ClusterCIDRs: []string{talossim.PodCIDRv4}, APIListen: socket})

	st := stateClient(t, socket)

	// The kubelet registers first, so that its claim is decided before any other Node asks for a block.
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: hostile, Labels: map[string]string{corev1.LabelHostname: hostile}},
		Spec:       corev1.NodeSpec{PodCIDR: talossim.PodCIDRv4, PodCIDRs: []string{talossim.PodCIDRv4}},
	}

	_, err := kubeletClientset(t, hostile).CoreV1().Nodes().Create(t.Context(), n, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		_ = env.Clientset().CoreV1().Nodes().Delete(context.Background(), hostile, metav1.DeleteOptions{})
	})

	id := ipam.NodeAllocationID(hostile, ipam.FamilyIPv4)

	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "the claim decided", func(ctx context.Context) error {
		alloc := ipAllocations(ctx, st, id)[id]
		if alloc == nil {
			return errors.New("no allocation yet")
		}

		if alloc.GetState() != ipam.StateConflict {
			return fmt.Errorf("the claim is %s %s, not a conflict", alloc.GetState(), alloc.GetAddress())
		}

		return nil
	})

	reason := ipAllocations(t.Context(), st, id)[id].GetReason()
	assert.Contains(t, reason, "is not one /24 block")
	assert.Contains(t, reason, "spec.podCIDRs cannot be changed")

	waitEvents(t, 30*time.Second, "default", "PodCIDRConflict", hostile)

	// The Nodes that join get blocks of the claimed /16: the claim holds none.
	joinNodes(t, machines)
	waitNodes(t, names(machines), 60*time.Second, hasPodCIDRs)

	cidrs := assertDistinctPodCIDRs(t, names(machines))
	claimed := netip.MustParsePrefix(talossim.PodCIDRv4)

	for name, c := range cidrs {
		require.Len(t, c, 1, name)
		assert.True(t, claimed.Contains(netip.MustParsePrefix(c[0]).Addr()), "%s: %s", name, c[0])
	}

	pool := ipPool(t.Context(), st, "pod/ipv4")
	require.NotNil(t, pool)
	assert.Equal(t, uint64(len(machines)), pool.GetUsed(), "only the joined Nodes hold blocks")
	assert.Equal(t, "True", pool.GetConditions()[1].GetStatus(), "the pool reports the conflict")
	assert.Len(t, pool.GetConflicts(), 1)

	// talos-ccm does not touch the claimed field (it cannot be changed), and the Node stays in conflict.
	got := getNode(t, hostile)
	assert.Equal(t, []string{talossim.PodCIDRv4}, got.Spec.PodCIDRs)
	assert.Equal(t, ipam.StateConflict, ipAllocations(t.Context(), st, id)[id].GetState())
}

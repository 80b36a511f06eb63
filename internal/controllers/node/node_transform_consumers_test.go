package node_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	nodectrl "github.com/talos-ccm/talos-ccm/internal/controllers/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// TestNodeTransformHeldByItsConsumers: a NodeTransform is written with the finalizers of its consumers from
// its creation; when its Node goes, it is torn down and waits for each consumer to let go, and its Node's
// mirror is released after it is destroyed.
func TestNodeTransformHeldByItsConsumers(t *testing.T) {
	consumers := []resource.Finalizer{"test.NodeSink", "test.Other"}

	s := ctest.New(t)
	s.Register(nodectrl.NewNodeTransformController(consumers...))
	ctx := s.Start()

	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value = &specs.ConfigSpec{ClusterName: "c1", Source: "test"}
	s.Create(cfg)

	kn := kube.NewKubeNode(kube.NamespaceName, "w1")
	kn.TypedSpec().Value = &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.1"}, Created: timestamppb.Now(), Uninitialized: true}
	s.Create(kn)

	ctest.AssertResource(s, "w1", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.ElementsMatch(consumers, *nt.Metadata().Finalizers())
		a.EqualValues(1, nt.Metadata().Version().Value(), "created with the finalizers, in one write")
	})

	// The Node goes: its mirror is torn down (as the mirror controller does).
	_, err := s.State.Teardown(ctx, kn.Metadata())
	require.NoError(t, err)

	ctest.AssertResource(s, "w1", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.Equal(resource.PhaseTearingDown, nt.Metadata().Phase())
	})

	ptr := node.NewNodeTransform(node.NamespaceName, "w1").Metadata()

	for _, consumer := range consumers {
		require.NoError(t, s.State.RemoveFinalizer(ctx, ptr, consumer))
	}

	ctest.AssertNoResource[*node.NodeTransform](s, "w1")

	// The mirror is released: the transform controller took its finalizer off.
	ctest.AssertResource(s, "w1", func(res *kube.KubeNode, a *assert.Assertions) {
		a.True(res.Metadata().Finalizers().Empty())
	})
}

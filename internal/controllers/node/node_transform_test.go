package node_test

import (
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource/rtestutils"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	nodectrl "github.com/talos-ccm/talos-ccm/internal/controllers/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

func TestNodeTransformController(t *testing.T) {
	// Cleanups run last-in first-out: this one runs after the runtime has stopped.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })

	rt := ctest.New(t)
	rt.Register(t, nodectrl.NewNodeTransformController())
	ctx := rt.Start(t, 20*time.Second)
	st := rt.State

	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value = &specs.ConfigSpec{ClusterName: "c1", Source: "test"}
	require.NoError(t, st.Create(ctx, cfg))

	kn := kube.NewKubeNode(kube.NamespaceName, "w1")
	kn.TypedSpec().Value = &specs.KubeNodeSpec{ProvidedNodeIps: []string{"10.0.0.1"}, Created: timestamppb.Now(), Uninitialized: true}
	require.NoError(t, st.Create(ctx, kn))

	// Without Talos facts, the transform says what it waits for.
	rtestutils.AssertResource(ctx, t, st, "w1", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.False(nt.TypedSpec().Value.GetInitialize())
		a.Contains(nt.TypedSpec().Value.GetPending(), "Talos facts")
	})

	pm := talos.NewPlatformMetadata(talos.NamespaceName, "w1")
	pm.TypedSpec().Value = &specs.PlatformMetadataSpec{HasPlatformMetadata: true, Platform: "hcloud", ProviderId: "hcloud://42", Zone: "fsn1-dc14"}
	require.NoError(t, st.Create(ctx, pm))

	ma := talos.NewMachineAddresses(talos.NamespaceName, "w1")
	ma.TypedSpec().Value = &specs.MachineAddressesSpec{Addresses: []*specs.MachineAddress{{Address: "10.0.0.1/24", LinkName: "eth0", Scope: "global"}}}
	require.NoError(t, st.Create(ctx, ma))

	rtestutils.AssertResource(ctx, t, st, "w1", func(nt *node.NodeTransform, a *assert.Assertions) {
		spec := nt.TypedSpec().Value
		a.True(spec.GetInitialize(), spec.GetPending())
		a.Equal("hcloud://42", spec.GetProviderId())
		a.Equal("fsn1-dc14", spec.GetLabels()[nodectrl.LabelZone])
		a.Equal("c1", spec.GetLabels()[nodectrl.LabelClusterName])
	})

	// A changed fact and a changed config both reach the transform.
	pm.TypedSpec().Value.Zone = "nbg1-dc3"
	require.NoError(t, st.Update(ctx, pm))

	cfg.TypedSpec().Value.ClusterName = "c2"
	require.NoError(t, st.Update(ctx, cfg))

	rtestutils.AssertResource(ctx, t, st, "w1", func(nt *node.NodeTransform, a *assert.Assertions) {
		a.Equal("nbg1-dc3", nt.TypedSpec().Value.GetLabels()[nodectrl.LabelZone])
		a.Equal("c2", nt.TypedSpec().Value.GetLabels()[nodectrl.LabelClusterName])
	})

	// The Node goes away: so does its transform.
	rtestutils.Destroy[*kube.KubeNode](ctx, t, st, []string{"w1"})
	rtestutils.AssertNoResource[*node.NodeTransform](ctx, t, st, "w1")
}

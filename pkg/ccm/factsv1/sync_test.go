package factsv1_test

import (
	"context"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/rtestutils"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// hostNamespace is the talos namespace of the cluster "cluster-a" in the host's state.
const hostNamespace resource.Namespace = "cluster-a:talos"

// hostFactsController is a host's controller as the package documentation describes it: the facts are
// its outputs, and it calls Sync with the machines the test hands it, then hands back Sync's result.
type hostFactsController struct {
	machines chan []factsv1.Machine
	results  chan error
	// opts are the host's options, given to every Sync.
	opts []factsv1.Option
}

func (ctrl *hostFactsController) Name() string { return "factsv1test.HostFactsController" }

func (ctrl *hostFactsController) Inputs() []controller.Input { return nil }

func (ctrl *hostFactsController) Outputs() []controller.Output { return factsv1.Outputs() }

func (ctrl *hostFactsController) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	for {
		var machines []factsv1.Machine

		select {
		case <-ctx.Done():
			return nil
		case machines = <-ctrl.machines:
		}

		err := factsv1.Sync(ctx, r, hostNamespace, machines, ctrl.opts...)

		select {
		case <-ctx.Done():
			return nil
		case ctrl.results <- err:
		}
	}
}

// sync has the controller call Sync with machines, and returns its error.
func (ctrl *hostFactsController) sync(ctx context.Context, t *testing.T, machines ...factsv1.Machine) error {
	t.Helper()

	select {
	case ctrl.machines <- machines:
	case <-ctx.Done():
		t.Fatal("the controller did not take the machines")
	}

	select {
	case err := <-ctrl.results:
		return err
	case <-ctx.Done():
		t.Fatal("the controller did not sync")
	}

	return nil
}

func TestSync(t *testing.T) {
	s := ctest.New(t)
	ctrl := &hostFactsController{machines: make(chan []factsv1.Machine), results: make(chan error)}
	s.Register(ctrl)
	ctx := s.Start()

	inHost := rtestutils.WithNamespace(hostNamespace)

	w1 := factsv1.Machine{
		NodeName: "w1", Platform: "aws", Zone: "eu-west-1a", ProviderID: "aws:///eu-west-1a/i-1", NodeIPs: []string{"10.0.1.4"},
		Addresses: []factsv1.Address{{Address: "10.0.1.4/24"}, {Address: "203.0.113.4", Exposure: factsv1.ExposurePublic}},
	}
	w2 := factsv1.Machine{NodeName: "w2", Platform: "metal", NodeIPs: []string{"10.0.1.5"}}

	// Created: both facts of every machine, named after its Node.
	require.NoError(t, ctrl.sync(ctx, t, w1, w2))

	ctest.AssertResource(s, "w1", func(pm *talos.PlatformMetadata, a *assert.Assertions) {
		a.True(w1.PlatformMetadataSpec().EqualVT(pm.TypedSpec().Value), "%v", pm.TypedSpec().Value)
		a.Equal(ctrl.Name(), pm.Metadata().Owner())
	}, inHost)

	ctest.AssertResource(s, "w1", func(ma *talos.MachineAddresses, a *assert.Assertions) {
		a.Equal("w1", ma.TypedSpec().Value.GetNodename())
		a.Equal("10.0.1.4", ma.TypedSpec().Value.GetNodeIp())
		a.Equal([]string{"10.0.1.4/24 - global inet4 -", "203.0.113.4/32 - global inet4 public"}, addressRows(ma.TypedSpec().Value))
	}, inHost)

	ctest.AssertResources(s, []resource.ID{"w2"}, func(*talos.MachineAddresses, *assert.Assertions) {}, inHost)

	// The same machines again: nothing is written.
	before, err := safe.StateGet[*talos.PlatformMetadata](ctx, s.State, talos.NewPlatformMetadata(hostNamespace, "w1").Metadata())
	require.NoError(t, err)

	require.NoError(t, ctrl.sync(ctx, t, w2, w1))

	after, err := safe.StateGet[*talos.PlatformMetadata](ctx, s.State, talos.NewPlatformMetadata(hostNamespace, "w1").Metadata())
	require.NoError(t, err)
	assert.Equal(t, before.Metadata().Version(), after.Metadata().Version())

	// Updated, and w2, no longer listed, removed.
	w1.Zone = "eu-west-1b"

	require.NoError(t, ctrl.sync(ctx, t, w1))

	ctest.AssertResource(s, "w1", func(pm *talos.PlatformMetadata, a *assert.Assertions) {
		a.Equal("eu-west-1b", pm.TypedSpec().Value.GetZone())
	}, inHost)
	ctest.AssertNoResource[*talos.PlatformMetadata](s, "w2", inHost)
	ctest.AssertNoResource[*talos.MachineAddresses](s, "w2", inHost)

	// w1 turns invalid: it keeps the facts it had, while w3 is written, and the error names w1 alone.
	broken := w1
	broken.Zone = "eu-west-1c"
	broken.Addresses = []factsv1.Address{{Address: "203.0.113.4", Exposure: "elsewhere"}}
	w3 := factsv1.Machine{NodeName: "w3", NodeIPs: []string{"10.0.1.6"}}

	err = ctrl.sync(ctx, t, w3, broken)
	require.Error(t, err)

	var invalid *factsv1.InvalidMachineError
	require.ErrorAs(t, err, &invalid)
	assert.Equal(t, 1, invalid.Index)
	assert.Equal(t, "w1", invalid.NodeName)
	assert.Equal(t, `machines[1] (Node "w1"): addresses[0] "203.0.113.4": unknown exposure "elsewhere" (want "", "public" or "private")`, err.Error())

	ctest.AssertResources(s, []resource.ID{"w3"}, func(*talos.MachineAddresses, *assert.Assertions) {}, inHost)
	ctest.AssertResource(s, "w1", func(pm *talos.PlatformMetadata, a *assert.Assertions) {
		a.Equal("eu-west-1b", pm.TypedSpec().Value.GetZone())
	}, inHost)
	ctest.AssertResource(s, "w1", func(ma *talos.MachineAddresses, a *assert.Assertions) {
		a.Equal([]string{"10.0.1.4/24 - global inet4 -", "203.0.113.4/32 - global inet4 public"}, addressRows(ma.TypedSpec().Value))
	}, inHost)

	// A Node name listed twice is refused both times; a machine without a Node name keeps nothing.
	err = ctrl.sync(ctx, t, w1, w3, factsv1.Machine{NodeName: "w3", Zone: "z"}, factsv1.Machine{})
	require.Error(t, err)

	assert.Equal(t, strings.Join([]string{
		`machines[1] (Node "w3"): the Node name is listed 2 times`,
		`machines[2] (Node "w3"): the Node name is listed 2 times`,
		`machines[3] (Node ""): nodeName: required`,
	}, "\n"), err.Error())

	ctest.AssertResource(s, "w3", func(pm *talos.PlatformMetadata, a *assert.Assertions) {
		a.Empty(pm.TypedSpec().Value.GetZone())
	}, inHost)

	// No machine: no facts.
	require.NoError(t, ctrl.sync(ctx, t))

	ctest.AssertLength[*talos.PlatformMetadata](s, 0, inHost)
	ctest.AssertLength[*talos.MachineAddresses](s, 0, inHost)
}

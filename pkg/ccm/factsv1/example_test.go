package factsv1_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

// inventoryController is a host's controller that feeds one cluster's facts: the host lists the cluster's
// machines (from its own inventory; a fixed list here) and Sync writes them, as outputs of this controller,
// into the cluster's talos namespace of the host's state.
type inventoryController struct {
	// prefix is the cluster's namespace prefix.
	prefix   string
	machines func() []factsv1.Machine
	// synced receives the result of every Sync.
	synced chan<- error
}

func (ctrl *inventoryController) Name() string { return "example.InventoryController" }

func (ctrl *inventoryController) Inputs() []controller.Input { return nil }

// Outputs are the facts: the host's controller alone writes them.
func (ctrl *inventoryController) Outputs() []controller.Output { return factsv1.Outputs() }

func (ctrl *inventoryController) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}

		// Sync writes the valid machines and reports the others; a failure of the state is returned as is.
		err := factsv1.Sync(ctx, r, clusters.HostNamespace(ctrl.prefix, ccm.TalosNamespace), ctrl.machines())

		select {
		case <-ctx.Done():
			return nil
		case ctrl.synced <- err:
		}
	}
}

// A host feeds the facts of a cluster's machines from a controller of its own runtime: Sync writes the
// PlatformMetadata and MachineAddresses of every valid machine under its Node name, and says which machines
// it refused.
func ExampleSync() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The host's state and runtime (a clusters.Controller runs there too, which reads the facts; not here).
	hostState := state.WrapCore(namespaced.NewState(clusters.MemoryStateBuilder()))

	host, err := runtime.NewRuntime(hostState, zap.NewNop())
	if err != nil {
		fmt.Println(err)

		return
	}

	synced := make(chan error)

	if err = host.RegisterController(&inventoryController{
		prefix: "cluster-a:",
		machines: func() []factsv1.Machine {
			return []factsv1.Machine{
				{
					NodeName:     "worker-1",
					Platform:     "aws",
					Region:       "eu-west-1",
					Zone:         "eu-west-1a",
					InstanceType: "m7g.large",
					ProviderID:   "aws:///eu-west-1a/i-0123456789abcdef0",
					NodeIPs:      []string{"10.0.0.5"},
					Addresses: []factsv1.Address{
						{Address: "10.0.0.5/24", Link: "eth0"},
						{Address: "203.0.113.5", Exposure: factsv1.ExposurePublic},
					},
				},
				// Refused: its node IP is not an IP. Its facts, if it had any, stay as they were.
				{NodeName: "worker-2", NodeIPs: []string{"10.0.0.300"}},
			}
		},
		synced: synced,
	}); err != nil {
		fmt.Println(err)

		return
	}

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() { done <- host.Run(runCtx) }()

	defer func() {
		stop()

		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Println("host runtime:", err)
		}
	}()

	var invalid *factsv1.InvalidMachineError
	if err = <-synced; errors.As(err, &invalid) {
		fmt.Println("refused:", invalid.NodeName)
	}

	// What a cluster's pipeline reads: the facts of each Node, in its talos namespace.
	ns := clusters.HostNamespace("cluster-a:", ccm.TalosNamespace)

	metadata, err := safe.StateGet[*ccm.PlatformMetadata](ctx, hostState, ccm.NewPlatformMetadataIn(ns, "worker-1").Metadata())
	if err != nil {
		fmt.Println(err)

		return
	}

	spec := metadata.TypedSpec().Value
	fmt.Println(metadata.Metadata().ID(), spec.GetPlatform(), spec.GetZone(), spec.GetProviderId())

	addresses, err := safe.StateGet[*ccm.MachineAddresses](ctx, hostState, ccm.NewMachineAddressesIn(ns, "worker-1").Metadata())
	if err != nil {
		fmt.Println(err)

		return
	}

	for _, a := range addresses.TypedSpec().Value.GetAddresses() {
		fmt.Printf("%s link=%q exposure=%q\n", a.GetAddress(), a.GetLinkName(), a.GetExposure())
	}
	// Output:
	// refused: worker-2
	// worker-1 aws eu-west-1a aws:///eu-west-1a/i-0123456789abcdef0
	// 203.0.113.5/32 link="" exposure="public"
	// 10.0.0.5/24 link="eth0" exposure=""
}

// Validate says, before a host stores a machine, everything talos-ccm would refuse in it.
func ExampleMachine_Validate() {
	m := factsv1.Machine{
		NodeName:    "worker-1",
		MachineType: "master",
		Addresses:   []factsv1.Address{{Address: "10.0.0.5/24", Exposure: "internet"}},
	}

	// Every problem is in the error, one by one for errors.As and errors.Is.
	if problems, ok := m.Validate().(interface{ Unwrap() []error }); ok {
		for _, problem := range problems.Unwrap() {
			fmt.Println(problem)
		}
	}
	// Output:
	// machineType "master": not "controlplane", "worker" or empty
	// addresses[0] "10.0.0.5/24": unknown exposure "internet" (want "", "public" or "private")
}

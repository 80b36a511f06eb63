package node

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	cosiruntime "github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// benchNodes is how many Nodes join in one run of BenchmarkNodeTransform.
const benchNodes = 1000

// BenchmarkNodeTransform decides the NodeTransforms of benchNodes joining Nodes on the in-memory state
// talos-ccm runs with, once by the NodeTransform controller and once by a qtransform controller of the same
// settings and the same transform (what the controller was before it ran its own passes), and reports the
// CPU time and the allocations per Node of each. With the facts first, each Node is decided once (its
// KubeNode comes last); with the Nodes first, as the informer and the Talos source write them while a
// cluster joins, each Node is decided again as its facts come, as often as the controller keeps up.
func BenchmarkNodeTransform(b *testing.B) {
	for _, bc := range []struct {
		name  string
		build func() any
	}{
		{"qtransform", func() any { return newQTransformNodeTransform() }},
		{"decision", func() any { return NewNodeTransformController() }},
	} {
		for _, factsFirst := range []bool{true, false} {
			name := bc.name + "/nodes-first"
			if factsFirst {
				name = bc.name + "/facts-first"
			}

			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()

				var (
					cpu     time.Duration
					mallocs uint64
				)

				created := goroutinesCreated()

				for range b.N {
					c, m := joinNodes(b, bc.build(), factsFirst)
					cpu += c
					mallocs += m
				}

				per := float64(b.N * benchNodes)

				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/node")
				b.ReportMetric(float64(cpu.Nanoseconds())/per, "cpu-ns/node")
				b.ReportMetric(float64(mallocs)/per, "allocs/node")
				b.ReportMetric(float64(goroutinesCreated()-created)/per, "goroutines/node")
			})
		}
	}
}

// joinNodes runs ctrl on a new state, makes benchNodes Nodes join with the timer running (their facts first
// or last), waits for every one to be initialized, and returns the process's CPU time and allocations
// meanwhile.
func joinNodes(b *testing.B, ctrl any, factsFirst bool) (time.Duration, uint64) {
	b.Helper()
	b.StopTimer()

	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()

	st := cosistate.NewMemoryState()

	rt, err := cosiruntime.NewRuntime(st, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}

	switch c := ctrl.(type) {
	case controller.QController:
		err = rt.RegisterQController(c)
	case *NodeTransformController:
		c.SetWatches(keyed.NewWatches(st))
		err = rt.RegisterController(c)
	}

	if err != nil {
		b.Fatal(err)
	}

	var wg sync.WaitGroup

	defer wg.Wait()
	defer cancel()

	wg.Go(func() { rt.Run(ctx) }) //nolint:errcheck // the run ends with the benchmark's context.

	events := make(chan state.Event, 4*benchNodes)
	if err = st.WatchKind(ctx, resource.NewMetadata(node.NamespaceName, node.NodeTransformType, "", resource.VersionUndefined), events); err != nil {
		b.Fatal(err)
	}

	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value = &specs.ConfigSpec{ClusterName: "bench", Source: "bench"}
	create(ctx, b, st, cfg)

	var before runtime.MemStats

	runtime.ReadMemStats(&before)
	cpuBefore := processCPU(b)

	b.StartTimer()

	created := timestamppb.New(time.Now().Add(-time.Hour))

	if factsFirst {
		createFacts(ctx, b, st)
	}

	for i := range benchNodes {
		name, ip := benchNode(i)

		// The Node mirror writes the KubeNodes with the finalizers of their consumers (pkg/ccm), so that
		// these do not add them with a write each.
		kn := kube.NewKubeNode(kube.NamespaceName, name)
		kn.TypedSpec().Value = &specs.KubeNodeSpec{ProvidedNodeIps: []string{ip}, Created: created, Uninitialized: true}
		kn.Metadata().Finalizers().Add(ctrl.(interface{ Name() string }).Name())
		create(ctx, b, st, kn)
	}

	if !factsFirst {
		createFacts(ctx, b, st)
	}

	waitInitialized(ctx, b, events)

	b.StopTimer()

	cpu := processCPU(b) - cpuBefore

	var after runtime.MemStats

	runtime.ReadMemStats(&after)

	return cpu, after.Mallocs - before.Mallocs
}

// benchNode is the name and the address of the i-th Node.
func benchNode(i int) (name, ip string) {
	return fmt.Sprintf("w%d", i), fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
}

// createFacts creates the PlatformMetadata and MachineAddresses of every Node's metal machine.
func createFacts(ctx context.Context, b *testing.B, st state.State) {
	b.Helper()

	for i := range benchNodes {
		name, ip := benchNode(i)

		pm := talos.NewPlatformMetadata(talos.NamespaceName, name)
		pm.TypedSpec().Value = &specs.PlatformMetadataSpec{
			Nodename: name, HasPlatformMetadata: true, Platform: "metal", Uuid: "uuid-" + name, NodeIp: ip, Hostname: name, Zone: "a",
		}
		create(ctx, b, st, pm)

		ma := talos.NewMachineAddresses(talos.NamespaceName, name)
		ma.TypedSpec().Value = &specs.MachineAddressesSpec{
			Nodename: name, NodeIp: ip, Addresses: []*specs.MachineAddress{{Address: ip + "/16", LinkName: "eth0", Scope: "global"}},
		}
		create(ctx, b, st, ma)
	}
}

// waitInitialized waits until the NodeTransform of every Node says to initialize it.
func waitInitialized(ctx context.Context, b *testing.B, events <-chan state.Event) {
	b.Helper()

	initialized := make(map[resource.ID]bool, benchNodes)

	for len(initialized) < benchNodes {
		select {
		case <-ctx.Done():
			b.Fatalf("%d of %d nodes initialized: %v", len(initialized), benchNodes, ctx.Err())
		case ev := <-events:
			nt, ok := ev.Resource.(*node.NodeTransform)
			if ev.Type == state.Errored {
				b.Fatal(ev.Error)
			}

			if ok && nt.TypedSpec().Value.GetInitialize() {
				initialized[nt.Metadata().ID()] = true
			}
		}
	}
}

func create(ctx context.Context, b *testing.B, st state.State, res resource.Resource) {
	b.Helper()

	if err := st.Create(ctx, res); err != nil {
		b.Fatal(err)
	}
}

// goroutinesCreated is how many goroutines the process has started: each one a pass worker starts grows its
// stack anew.
func goroutinesCreated() uint64 {
	sample := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(sample)

	return sample[0].Value.Uint64()
}

// processCPU is the CPU time the process has used, in user and system mode.
func processCPU(b *testing.B) time.Duration {
	b.Helper()

	var usage syscall.Rusage

	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &usage); err != nil {
		b.Fatal(err)
	}

	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

// newQTransformNodeTransform is the NodeTransform controller as a qtransform controller, as it was before it
// ran its own passes: the same name, inputs, outputs, transform and teardown.
func newQTransformNodeTransform() controller.QController {
	t := &nodeTransformer{claims: newClaimRegistry()}

	return qtransform.NewQController(
		qtransform.Settings[*kube.KubeNode, *node.NodeTransform]{
			Name: nodeTransformName,
			MapMetadataFunc: func(in *kube.KubeNode) *node.NodeTransform {
				return node.NewNodeTransform(node.NamespaceName, in.Metadata().ID())
			},
			UnmapMetadataFunc: func(out *node.NodeTransform) *kube.KubeNode {
				return kube.NewKubeNode(kube.NamespaceName, out.Metadata().ID())
			},
			// qtransform hands the transform a copy of the output as last written: it is the previous
			// decision as well as the output to fill.
			TransformExtraOutputFunc: func(ctx context.Context, rw controller.ReaderWriter, logger *zap.Logger, in *kube.KubeNode, out *node.NodeTransform) error {
				return t.transform(ctx, rw, logger, in, out, out)
			},
			FinalizerRemovalExtraOutputFunc: t.teardown,
		},
		// The NodeTransform controller's extra output and extra inputs, as qtransform options.
		qtransform.WithExtraOutputs(controller.Output{Type: node.NodeClaimRecheckType, Kind: controller.OutputExclusive}),
		qtransform.WithExtraMappedInput[*node.NodeClaimRecheck](qtransform.MapperSameID[*kube.KubeNode]()),
		qtransform.WithExtraMappedInput[*talos.PlatformMetadata](qtransform.MapperSameID[*kube.KubeNode]()),
		qtransform.WithExtraMappedInput[*talos.MachineAddresses](qtransform.MapperSameID[*kube.KubeNode]()),
		qtransform.WithExtraMappedInput[*talos.MachineStatus](qtransform.MapperSameID[*kube.KubeNode]()),
		qtransform.WithExtraMappedInput[*config.Config](qtransform.MapperFuncFromTyped[*config.Config](
			func(ctx context.Context, logger *zap.Logger, r controller.QRuntime, cfg *config.Config) ([]resource.Pointer, error) {
				ids, err := allKubeNodes(ctx, logger, r, cfg)

				ptrs := make([]resource.Pointer, 0, len(ids))
				for _, id := range ids {
					ptrs = append(ptrs, resource.NewMetadata(kube.NamespaceName, kube.KubeNodeType, id, resource.VersionUndefined))
				}

				return ptrs, err
			})),
		qtransform.WithConcurrency(decisionConcurrency),
	)
}

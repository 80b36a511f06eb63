package decision_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/generic/qtransform"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/gen/xerrors"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/controllers/internal/decision"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

const (
	// controllerName is the test controller's name, its finalizer on the inputs.
	controllerName = "test.DecisionController"
	// consumer is the finalizer of a consumer of the outputs.
	consumer = "test.Consumer"
)

// harness is what a case of TestController works with: the suite, and what the controller reports.
type harness struct {
	s *ctest.Suite
	// passes receives, for each decision, the providerID of the KubeNode it read and the version of the
	// MachineStatus (0 without one): "a/1".
	passes chan string
	// started and gate, when the case sets them, report each decision as it starts and hold it until
	// gate receives.
	started, gate chan struct{}
	// tornDown receives the ID of each input the teardown hook ran for.
	tornDown chan resource.ID
	// running counts the decisions running at once; overlapped is set if two ever did.
	running    atomic.Int32
	overlapped atomic.Bool
}

// decide is the test controller's decision: the output's reason is the KubeNode's providerID, decided only
// once a MachineStatus of the same ID exists (the controller's "not yet"), held by the consumer; a
// MachineStatus of stage "requeue" asks for the decision again at once.
func (h *harness) decide(ctx context.Context, r controller.ReaderWriter, _ *zap.Logger, in *kube.KubeNode, previous, out *node.NodeLifecycle) error {
	if h.running.Add(1) > 1 {
		h.overlapped.Store(true)
	}

	defer h.running.Add(-1)

	if h.gate != nil {
		if !send(ctx, h.started, struct{}{}) || !receive(ctx, h.gate) {
			return ctx.Err()
		}
	}

	status, err := safe.ReaderGetByID[*talos.MachineStatus](ctx, r, in.Metadata().ID())

	var statusVersion uint64
	if err == nil {
		statusVersion = status.Metadata().Version().Value()
	}

	send(ctx, h.passes, fmt.Sprintf("%s/%d", in.TypedSpec().Value.GetProviderId(), statusVersion))

	if err != nil {
		return xerrors.NewTaggedf[qtransform.SkipReconcileTag]("no machine status yet")
	}

	out.TypedSpec().Value = &specs.NodeLifecycleSpec{Reason: in.TypedSpec().Value.GetProviderId(), Shutdown: previous.TypedSpec().Value.GetShutdown()}
	out.Metadata().Finalizers().Add(consumer)

	if status.TypedSpec().Value.GetStage() == "requeue" {
		return controller.NewRequeueInterval(time.Millisecond)
	}

	return nil
}

func send[T any](ctx context.Context, ch chan<- T, v T) bool {
	select {
	case ch <- v:
		return true
	case <-ctx.Done():
		return false
	}
}

func receive[T any](ctx context.Context, ch <-chan T) bool {
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

func (h *harness) kubeNode(providerID string) *kube.KubeNode {
	kn := kube.NewKubeNode(kube.NamespaceName, "n1")
	kn.TypedSpec().Value = &specs.KubeNodeSpec{ProviderId: providerID}

	return kn
}

func (h *harness) machineStatus(stage string) *talos.MachineStatus {
	ms := talos.NewMachineStatus(talos.NamespaceName, "n1")
	ms.TypedSpec().Value = &specs.MachineStatusSpec{Stage: stage}

	return ms
}

// setProviderID changes the KubeNode's providerID.
func (h *harness) setProviderID(id string) {
	ctest.Modify(h.s, h.kubeNode(""), func(kn *kube.KubeNode) error {
		kn.TypedSpec().Value.ProviderId = id

		return nil
	})
}

// nextPass waits for the next decision and returns what it read.
func (h *harness) nextPass(t *testing.T) string {
	t.Helper()

	select {
	case p := <-h.passes:
		return p
	case <-h.s.Ctx().Done():
		t.Fatal("no decision")

		return ""
	}
}

// awaitPass waits for a decision that read want, skipping the others.
func (h *harness) awaitPass(t *testing.T, want string) {
	t.Helper()

	for got := h.nextPass(t); got != want; got = h.nextPass(t) {
		t.Logf("decision of %q, waiting for one of %q", got, want)
	}
}

// assertOutput waits for the output of n1 to say reason, and checks its version.
func (h *harness) assertOutput(reason string, version uint64) {
	ctest.AssertResource(h.s, "n1", func(out *node.NodeLifecycle, a *assert.Assertions) {
		a.Equal(reason, out.TypedSpec().Value.GetReason())
		a.Equal(version, out.Metadata().Version().Value())
		a.Equal(controllerName, out.Metadata().Owner())
		a.True(out.Metadata().Finalizers().Has(consumer))
	})
}

func TestController(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		// gated holds every decision until the case lets it go.
		gated bool
		run   func(t *testing.T, h *harness)
	}{
		{
			name: "decided, held by its input's finalizer, and written only when it changes",
			run: func(t *testing.T, h *harness) {
				h.s.Create(h.machineStatus("running"), h.kubeNode("a"))
				h.assertOutput("a", 1)

				ctest.AssertResource(h.s, "n1", func(in *kube.KubeNode, a *assert.Assertions) {
					a.True(in.Metadata().Finalizers().Has(controllerName))
				})

				// A change of the extra input decides again, to the same output: nothing is written (the next
				// change is the output's second version, not its third).
				ctest.Modify(h.s, h.machineStatus(""), func(ms *talos.MachineStatus) error {
					ms.TypedSpec().Value.Reachable = true

					return nil
				})
				h.awaitPass(t, "a/2")

				h.setProviderID("b")
				h.assertOutput("b", 2)
			},
		},
		{
			name: "torn down: teardown hook, output destroyed once its consumer lets go, then the finalizer removed",
			run: func(t *testing.T, h *harness) {
				h.s.Create(h.machineStatus("running"), h.kubeNode("a"))
				h.assertOutput("a", 1)

				_, err := h.s.State.Teardown(h.s.Ctx(), h.kubeNode("").Metadata())
				require.NoError(t, err)

				select {
				case id := <-h.tornDown:
					assert.Equal(t, "n1", id)
				case <-h.s.Ctx().Done():
					t.Fatal("no teardown")
				}

				ctest.AssertResource(h.s, "n1", func(out *node.NodeLifecycle, a *assert.Assertions) {
					a.Equal(resource.PhaseTearingDown, out.Metadata().Phase())
				})
				ctest.AssertResource(h.s, "n1", func(in *kube.KubeNode, a *assert.Assertions) {
					a.True(in.Metadata().Finalizers().Has(controllerName), "held until its output is gone")
				})

				require.NoError(t, h.s.State.RemoveFinalizer(h.s.Ctx(), node.NewNodeLifecycle(node.NamespaceName, "n1").Metadata(), consumer))

				ctest.AssertNoResource[*node.NodeLifecycle](h.s, "n1")
				ctest.AssertResource(h.s, "n1", func(in *kube.KubeNode, a *assert.Assertions) {
					a.True(in.Metadata().Finalizers().Empty())
				})
			},
		},
		{
			name: "skipped: nothing written until what it waits for comes",
			run: func(t *testing.T, h *harness) {
				h.s.Create(h.kubeNode("a"))
				assert.Equal(t, "a/0", h.nextPass(t))

				ctest.AssertResource(h.s, "n1", func(in *kube.KubeNode, a *assert.Assertions) {
					a.True(in.Metadata().Finalizers().Has(controllerName))
				})

				out, err := safe.StateGetByID[*node.NodeLifecycle](h.s.Ctx(), h.s.State, "n1")
				require.Error(t, err, "skipped, yet written: %v", out)

				h.s.Create(h.machineStatus("running"))
				h.assertOutput("a", 1)
			},
		},
		{
			name: "requeued: decided again after the interval, with no event",
			run: func(t *testing.T, h *harness) {
				h.s.Create(h.machineStatus("requeue"), h.kubeNode("a"))

				for range 3 {
					assert.Equal(t, "a/1", h.nextPass(t))
				}

				h.assertOutput("a", 1)
			},
		},
		{
			name:  "changed while its decision runs: decided again after it, never twice at once",
			gated: true,
			run: func(t *testing.T, h *harness) {
				h.s.Create(h.machineStatus("running"), h.kubeNode("a"))

				// The first decision, of "a", is held while the input changes to "b".
				require.True(t, receive(h.s.Ctx(), h.started))
				h.setProviderID("b")
				h.gate <- struct{}{}

				assert.Equal(t, "a/1", h.nextPass(t))
				h.assertOutput("a", 1)

				// The change was queued behind it, and is decided once it is done.
				require.True(t, receive(h.s.Ctx(), h.started))
				h.gate <- struct{}{}

				assert.Equal(t, "b/1", h.nextPass(t))
				h.assertOutput("b", 2)
				assert.False(t, h.overlapped.Load(), "two decisions of one input ran at once")
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			h := &harness{
				s:        ctest.New(t, ctest.WithoutLeakCheck()),
				passes:   make(chan string, 64),
				tornDown: make(chan resource.ID, 8),
			}

			if tc.gated {
				h.started, h.gate = make(chan struct{}), make(chan struct{})
			}

			h.s.Register(decision.New(decision.Settings[*kube.KubeNode, *node.NodeLifecycle]{
				Name:      controllerName,
				NewOutput: node.NewNodeLifecycle,
				Decide:    h.decide,
				Teardown: func(_ context.Context, _ controller.ReaderWriter, _ *zap.Logger, in *kube.KubeNode) error {
					h.tornDown <- in.Metadata().ID()

					return nil
				},
				Concurrency: 4,
				Options:     []decision.Option{decision.SameIDInput[*talos.MachineStatus]()},
			}))
			h.s.Start()

			tc.run(t, h)
		})
	}
}

// TestControllerCapConcurrency: a controller capped to one pass at once decides its inputs one after the
// other, where it would decide them together otherwise.
func TestControllerCapConcurrency(t *testing.T) {
	for _, tc := range []struct {
		name        string
		capped      bool
		wantRunning int32
	}{
		{name: "own bound", wantRunning: 2},
		{name: "capped to one", capped: true, wantRunning: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// In a bubble: synctest.Wait tells when every pass that may start has started and waits.
			synctest.Test(t, func(t *testing.T) {
				var running, most atomic.Int32

				release := make(chan struct{})
				s := ctest.New(t)

				ctrl := decision.New(decision.Settings[*kube.KubeNode, *node.NodeLifecycle]{
					Name:      controllerName,
					NewOutput: node.NewNodeLifecycle,
					Decide: func(ctx context.Context, _ controller.ReaderWriter, _ *zap.Logger, _ *kube.KubeNode, _, _ *node.NodeLifecycle) error {
						n := running.Add(1)
						defer running.Add(-1)

						for m := most.Load(); n > m; m = most.Load() {
							if most.CompareAndSwap(m, n) {
								break
							}
						}

						receive(ctx, release)

						return nil
					},
					Concurrency: 4,
				})

				if tc.capped {
					ctrl.CapConcurrency(1)
				}

				s.Register(ctrl)
				s.Start()
				s.Create(kube.NewKubeNode(kube.NamespaceName, "n1"), kube.NewKubeNode(kube.NamespaceName, "n2"))

				synctest.Wait()
				assert.Equal(t, tc.wantRunning, running.Load())

				close(release)
				ctest.AssertResources(s, []resource.ID{"n1", "n2"}, func(*node.NodeLifecycle, *assert.Assertions) {})
				assert.Equal(t, tc.wantRunning, most.Load())
			})
		})
	}
}

// TestControllerIdleHoldsOneGoroutine: once its inputs are decided and its workers' linger has passed, a
// decision controller holds one goroutine, its Run waiting for its watches: no pass worker, no loop waiting
// for keys, none of the three a queued controller holds in the runtime (its queue's loop, a worker, the
// group that waits for them).
func TestControllerIdleHoldsOneGoroutine(t *testing.T) {
	// In a bubble: synctest.Wait returns once every goroutine has ended or waits.
	synctest.Test(t, func(t *testing.T) {
		s := ctest.New(t)
		s.Register(decision.New(decision.Settings[*kube.KubeNode, *node.NodeLifecycle]{
			Name:      controllerName,
			NewOutput: node.NewNodeLifecycle,
			Decide: func(context.Context, controller.ReaderWriter, *zap.Logger, *kube.KubeNode, *node.NodeLifecycle, *node.NodeLifecycle) error {
				return nil
			},
			Concurrency: 4,
		}))
		s.Start()
		s.Create(kube.NewKubeNode(kube.NamespaceName, "n1"), kube.NewKubeNode(kube.NamespaceName, "n2"))
		ctest.AssertResources(s, []resource.ID{"n1", "n2"}, func(*node.NodeLifecycle, *assert.Assertions) {})

		synctest.Wait()
		time.Sleep(keyed.WorkerLinger)
		synctest.Wait()

		held := ctest.ControllerGoroutines()
		require.Len(t, held, 1, "goroutines of the idle controller: %v", held)
		assert.Contains(t, held[0], "internal/decision.(*Controller[...]).Run")
	})
}

package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/rtestutils"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	"google.golang.org/protobuf/types/known/durationpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/factsv1"
)

const shutdownKey = "node.cloudprovider.kubernetes.io/shutdown"

// hostFeed is what a host knows of one cluster's machines at one moment, and its options.
type hostFeed struct {
	machines []factsv1.Machine
	opts     []factsv1.Option
}

// lifecycleHost is a host's controller that feeds one cluster's facts with factsv1.Sync: every feed the test
// hands it is synced before the next is taken, and Sync's result handed back.
type lifecycleHost struct {
	ns      resource.Namespace
	feeds   chan hostFeed
	results chan error
}

func (h *lifecycleHost) Name() string { return "host.LifecycleFactsController" }

func (h *lifecycleHost) Inputs() []controller.Input { return nil }

func (h *lifecycleHost) Outputs() []controller.Output { return factsv1.Outputs() }

func (h *lifecycleHost) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	for {
		var feed hostFeed

		select {
		case <-ctx.Done():
			return nil
		case feed = <-h.feeds:
		}

		err := factsv1.Sync(ctx, r, h.ns, feed.machines, feed.opts...)

		select {
		case <-ctx.Done():
			return nil
		case h.results <- err:
		}
	}
}

// feed has the host sync machines with opts.
func (h *lifecycleHost) feed(ctx context.Context, t *testing.T, opts []factsv1.Option, machines ...factsv1.Machine) {
	t.Helper()

	select {
	case h.feeds <- hostFeed{machines: machines, opts: opts}:
	case <-ctx.Done():
		t.Fatal("the host did not take the machines")
	}

	select {
	case err := <-h.results:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the host did not sync")
	}
}

// TestLifecycleFactsFromHost: an embedded cluster whose machines' lifecycle comes from the host through
// factsv1, end to end on a real control plane. A machine the host marks shutting down gets the shutdown
// taint on its NotReady Node, and loses it when the host marks it running again; a machine the host marks
// removed keeps its Node until the host opts in to their deletion, and then its Node is deleted. An aws
// machine whose address has no link name gets it as its ExternalIP with the host's ExposureFromIP.
func TestLifecycleFactsFromHost(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	const (
		clusterName = "omega"
		prefix      = "omega:"
		grace       = time.Second
	)

	env := testenv.Start(t)
	logger := zaptest.NewLogger(t)
	hostState := state.WrapCore(cosistate.NewMemoryState())

	require.NoError(t, clusters.RegisterResources(ctx, hostState, ""))

	host, err := runtime.NewRuntime(hostState, logger.Named("host"))
	require.NoError(t, err)

	facts := &lifecycleHost{ns: clusters.HostNamespace(prefix, ccm.TalosNamespace), feeds: make(chan hostFeed), results: make(chan error)}
	require.NoError(t, host.RegisterController(facts))

	ctrl, err := clusters.NewController(hostState, clusters.Options{
		ClientConfig: func(context.Context, string) (*rest.Config, error) { return env.Config, nil },
		Logger:       logger,
	})
	require.NoError(t, err)
	require.NoError(t, host.RegisterController(ctrl))

	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 2)

	go func() { done <- host.Run(runCtx) }()

	declared := clusters.NewCluster(clusters.DefaultNamespace, clusterName)
	declared.TypedSpec().Value = &specs.ClusterSpec{
		NamespacePrefix: prefix,
		HostFacts:       true,
		NodeLifecycle:   &specs.ClusterNodeLifecycle{StaleNodeGrace: durationpb.New(grace)},
	}
	require.NoError(t, hostState.Create(ctx, declared))

	view, err := cosistate.NewPrefixedState(hostState, prefix)
	require.NoError(t, err)

	// Two machines as the host knows them: IPs, no link names, running.
	w1 := factsv1.Machine{
		NodeName: "aws-w1", Platform: "aws", Zone: "us-east-1a", ProviderID: "aws:///us-east-1a/i-0001",
		NodeIPs: []string{"10.0.0.11"}, Addresses: []factsv1.Address{{Address: "10.0.0.11/24"}, {Address: "203.0.113.11"}},
		Stage: factsv1.StageRunning,
	}
	w2 := factsv1.Machine{NodeName: "metal-w2", Platform: "metal", NodeIPs: []string{"10.0.0.12"}, Stage: factsv1.StageRunning}
	fromIP := []factsv1.Option{factsv1.ExposureFromIP()}

	facts.feed(ctx, t, fromIP, w1, w2)

	kubelets, err := talossim.NewKubelets(env.Config, []talossim.Machine{
		{Name: w1.NodeName, Platform: w1.Platform, NodeIPs: []netip.Addr{netip.MustParseAddr(w1.NodeIPs[0])}},
		{Name: w2.NodeName, Platform: w2.Platform, NodeIPs: []netip.Addr{netip.MustParseAddr(w2.NodeIPs[0])}},
	}, talossim.KubeletOptions{Logger: logger.Named("kubelets")})
	require.NoError(t, err)

	go func() {
		if err := kubelets.Run(runCtx); err != nil && runCtx.Err() == nil {
			done <- err

			return
		}

		done <- nil
	}()

	t.Cleanup(func() {
		stop()

		for range 2 {
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
		}
	})

	nodes := env.Clientset().CoreV1().Nodes()

	waitNodeState := func(name, what string, check func(*corev1.Node) error) {
		t.Helper()

		testenv.Eventually(t, time.Minute, 100*time.Millisecond, name+": "+what, func(ctx context.Context) error {
			n, err := nodes.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}

			return check(n)
		})
	}

	initialized := func(n *corev1.Node) error {
		if n.Spec.ProviderID == "" || slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == uninitializedKey }) {
			return errors.New("not initialized")
		}

		return nil
	}

	waitNodeState(w1.NodeName, "initialized, with the address without link name as its ExternalIP", func(n *corev1.Node) error {
		if err := initialized(n); err != nil {
			return err
		}

		if got := nodeAddresses(n, corev1.NodeExternalIP); !slices.Equal(got, []string{"203.0.113.11"}) {
			return fmt.Errorf("ExternalIPs %v", got)
		}

		return nil
	})
	waitNodeState(w2.NodeName, "initialized", initialized)

	tainted := func(want bool) func(*corev1.Node) error {
		return func(n *corev1.Node) error {
			if got := slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == shutdownKey }); got != want {
				return fmt.Errorf("shutdown taint: %t, taints %v", got, n.Spec.Taints)
			}

			return nil
		}
	}

	// w1 shuts down: its kubelet stops posting Ready, and the host says so.
	require.NoError(t, kubelets.SetReady(ctx, w1.NodeName, false))

	w1.Stage = factsv1.StageShuttingDown
	facts.feed(ctx, t, fromIP, w1, w2)

	waitNodeState(w1.NodeName, "the shutdown taint", tainted(true))

	// The host marks it running again (its kubelet is not Ready yet): the taint goes.
	w1.Stage = factsv1.StageRunning
	facts.feed(ctx, t, fromIP, w1, w2)

	waitNodeState(w1.NodeName, "no shutdown taint", tainted(false))

	// The host removes w2 from the cluster, without opting in to the deletion: the verdict says the Node
	// would be deleted, and it stays past the grace.
	require.NoError(t, kubelets.SetReady(ctx, w2.NodeName, false))

	w2.Removed = true
	facts.feed(ctx, t, fromIP, w1, w2)

	rtestutils.AssertResource(ctx, t, view, w2.NodeName, func(r *ccm.NodeLifecycle, asrt *assert.Assertions) {
		asrt.False(r.TypedSpec().Value.GetDelete())
		asrt.Contains(r.TypedSpec().Value.GetReason(), "the host removed the machine from the cluster (the Node would be deleted with the host's opt-in")
	})

	require.NoError(t, testenv.HoldFor(ctx, 3*grace, 100*time.Millisecond, "the Node of a removed machine without the opt-in stays", func(ctx context.Context) error {
		_, err := nodes.Get(ctx, w2.NodeName, metav1.GetOptions{})

		return err
	}))

	lifecycle, err := safe.StateGetByID[*ccm.NodeLifecycle](ctx, view, w2.NodeName)
	require.NoError(t, err)
	assert.False(t, lifecycle.TypedSpec().Value.GetDelete(), lifecycle.TypedSpec().Value.GetReason())

	// The host opts in: the Node is deleted, and only it.
	facts.feed(ctx, t, append(fromIP, factsv1.DeleteRemovedNodes()), w1, w2)

	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the Node of the removed machine deleted", func(ctx context.Context) error {
		_, err := nodes.Get(ctx, w2.NodeName, metav1.GetOptions{})

		switch {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		default:
			return errors.New("still there")
		}
	})

	_, err = nodes.Get(ctx, w1.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
}

// nodeAddresses are the Node's addresses of type typ.
func nodeAddresses(n *corev1.Node, typ corev1.NodeAddressType) []string {
	var out []string

	for _, a := range n.Status.Addresses {
		if a.Type == typ {
			out = append(out, a.Address)
		}
	}

	return out
}

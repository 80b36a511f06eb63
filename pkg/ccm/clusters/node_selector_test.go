package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

// selectorLabel is the label that says which cluster a Node of the shared apiserver is of.
const selectorLabel = "host.example.com/cluster"

// TestClustersPartitionOneAPIServer: two clusters whose Nodes live on one apiserver, each declared with the
// node selector of its own Nodes. The host feeds both clusters the facts of all four machines, each with
// the cluster's own region and providerIDs, so that a pipeline that saw the other cluster's Nodes would
// initialize them from the wrong facts. Each pipeline mirrors only its own Nodes, and every Node is
// initialized from its own cluster's facts.
func TestClustersPartitionOneAPIServer(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	logger := zaptest.NewLogger(t)
	env := testenv.Start(t)

	names := []string{"alpha", "beta"}
	machines := talossim.Generate(4, 7)
	owner := map[string]string{} // cluster of each machine, by Node name

	for i := range machines {
		owner[machines[i].Name] = names[i%2]
	}

	prefixes := map[string]string{}
	for _, name := range names {
		prefixes[name] = name + ":"
	}

	hostState := state.WrapCore(namespaced.NewState(clusters.MemoryStateBuilder()))
	require.NoError(t, clusters.RegisterResources(ctx, hostState, ""))

	host, err := runtime.NewRuntime(hostState, logger.Named("host"))
	require.NoError(t, err)
	require.NoError(t, host.RegisterController(&factsController{prefixes: prefixes}))

	ctrl, err := clusters.NewController(hostState, clusters.Options{
		ClientConfig: func(context.Context, string) (*rest.Config, error) { return env.Config, nil },
		Logger:       logger,
	})
	require.NoError(t, err)
	require.NoError(t, host.RegisterController(ctrl))

	// Every cluster knows every machine, with facts of its own.
	facts := map[string][]talossim.Machine{}

	for _, name := range names {
		for _, m := range machines {
			m = m.Clone()
			m.ProviderID = fmt.Sprintf("host://%s/%s", name, m.Name)
			m.Region, m.Zone, m.InstanceType = name+"-region", name+"-region-a", name+".large"
			m.NoPlatformMetadata = false
			facts[name] = append(facts[name], m)

			require.NoError(t, hostState.Create(ctx, newHostMachine(name, m)))
		}

		declared := clusters.NewCluster(clusters.DefaultNamespace, name)
		declared.TypedSpec().Value = &specs.ClusterSpec{HostFacts: true, NodeSelector: selectorLabel + "=" + name}
		require.NoError(t, hostState.Create(ctx, declared))
	}

	runCtx, stop := context.WithCancel(ctx)

	var wg sync.WaitGroup

	wg.Go(func() {
		if err := host.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
			t.Error(err)
		}
	})

	t.Cleanup(func() {
		stop()
		wg.Wait()
	})

	// The Nodes, as their kubelets register them, each labeled with its cluster (a kubelet's --node-labels).
	for _, m := range machines {
		_, err = env.Clientset().CoreV1().Nodes().Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: m.Name, Labels: map[string]string{selectorLabel: owner[m.Name]}},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
				Key: uninitializedKey, Value: "true", Effect: corev1.TaintEffectNoSchedule,
			}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	for i, m := range machines {
		name := owner[m.Name]
		c := &cluster{name: name, env: env}

		waitNode(ctx, t, c, m.Name, func(n *corev1.Node) error {
			return checkNode(n, name, facts[name][i])
		})
	}

	// Each pipeline mirrors its own Nodes only.
	for _, name := range names {
		view, err := cosistate.NewPrefixedState(hostState, prefixes[name])
		require.NoError(t, err)

		var want []string

		for _, m := range machines {
			if owner[m.Name] == name {
				want = append(want, m.Name)
			}
		}

		slices.Sort(want)

		testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the Nodes of cluster "+name, func(ctx context.Context) error {
			nodes, err := safe.StateListAll[*ccm.KubeNode](ctx, view)
			if err != nil {
				return err
			}

			var got []string
			for n := range nodes.All() {
				got = append(got, n.Metadata().ID())
			}

			slices.Sort(got)

			if !slices.Equal(got, want) {
				return fmt.Errorf("mirrored Nodes %s, want %s", strings.Join(got, ","), strings.Join(want, ","))
			}

			return nil
		})
	}
}

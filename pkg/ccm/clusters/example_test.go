package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

// exampleAPIServer is an apiserver address nothing listens on: the examples run everywhere, and show what
// happens before a cluster's apiserver answers.
const exampleAPIServer = "https://127.0.0.1:1"

// exampleHost is a host's runtime with a clusters.Controller, over an in-memory state of the host.
type exampleHost struct {
	state state.State
	ctrl  *clusters.Controller
	stop  func()
}

// startExampleHost starts a host as a program such as Omni sets one up: its own state and runtime, the
// resource types of the clusters registered in the state, and one clusters.Controller in the runtime.
func startExampleHost(ctx context.Context, provider func(ctx context.Context, clusterID string) (*rest.Config, error)) (*exampleHost, error) {
	// A host state of NewHostState gives the memory of a removed cluster's namespaces back.
	hostState := clusters.NewHostState(clusters.MemoryStateBuilder())

	if err := clusters.RegisterResources(ctx, hostState, ""); err != nil {
		return nil, err
	}

	host, err := runtime.NewRuntime(hostState, zap.NewNop())
	if err != nil {
		return nil, err
	}

	ctrl, err := clusters.NewController(hostState, clusters.Options{ClientConfig: provider})
	if err != nil {
		return nil, err
	}

	if err = host.RegisterController(ctrl); err != nil {
		return nil, err
	}

	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() { done <- host.Run(ctx) }()

	// Stopping the host's runtime stops every cluster's pipeline and waits for them.
	return &exampleHost{state: hostState, ctrl: ctrl, stop: func() {
		cancel()

		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			fmt.Println("host runtime:", err)
		}
	}}, nil
}

// waitStatus waits for the ClusterStatus of a cluster to satisfy ready, and returns it.
func (h *exampleHost) waitStatus(ctx context.Context, id resource.ID, ready func(*specs.ClusterStatusSpec) bool) (*specs.ClusterStatusSpec, error) {
	status, err := safe.StateWatchFor[*clusters.ClusterStatus](ctx, h.state, clusters.NewClusterStatus(clusters.DefaultNamespace, id).Metadata(),
		state.WithCondition(func(r resource.Resource) (bool, error) {
			s, ok := r.(*clusters.ClusterStatus)

			return ok && ready(s.TypedSpec().Value), nil
		}))
	if err != nil {
		return nil, err
	}

	return status.TypedSpec().Value, nil
}

// A host declares a cluster as a Cluster resource of its own state: the clusters.Controller in its runtime
// starts the cluster's pipeline, and writes the cluster's health as a ClusterStatus of the same ID. The
// program examples/embed is a whole host built this way, which serves a directory of cluster files.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	host, err := startExampleHost(ctx, func(_ context.Context, clusterID string) (*rest.Config, error) {
		// The host's current credentials of the cluster, asked for when its pipeline starts, again on a 401
		// answer and on RefreshCredentials.
		return &rest.Config{Host: exampleAPIServer, BearerToken: "token-of-" + clusterID}, nil
	})
	if err != nil {
		fmt.Println(err)

		return
	}
	defer host.stop()

	cluster := clusters.NewCluster(clusters.DefaultNamespace, "cluster-a")
	cluster.TypedSpec().Value = &specs.ClusterSpec{
		// The host writes every machine's facts (package factsv1) into the cluster's talos namespace,
		// clusters.HostNamespace("cluster-a:", ccm.TalosNamespace).
		HostFacts:   true,
		Controllers: []string{"*", "-node-lifecycle"},
		Config:      &specs.ConfigSpec{ClusterName: "alpha"},
	}

	if err = host.state.Create(ctx, cluster); err != nil {
		fmt.Println(err)

		return
	}

	// The pipeline is built, and its informers wait for the apiserver, which nothing answers here: the
	// status says so, with the connection's error and since when.
	status, err := host.waitStatus(ctx, "cluster-a", func(s *specs.ClusterStatusSpec) bool {
		return s.GetPhase() == clusters.PhaseAPIServerUnreachable
	})
	if err != nil {
		fmt.Println(err)

		return
	}

	fmt.Println("phase:", status.GetPhase(), "since:", status.GetPhaseSince() != nil, "reason:", status.GetPhaseReason() != "")
	fmt.Println("namespace prefix:", status.GetNamespacePrefix())
	fmt.Println("controllers:", status.GetControllers())
	fmt.Println("host namespace of its facts:", clusters.HostNamespace(status.GetNamespacePrefix(), "talos"))
	// Output:
	// phase: apiserver-unreachable since: true reason: true
	// namespace prefix: cluster-a:
	// controllers: [cloud-node csr-approval]
	// host namespace of its facts: cluster-a:talos
}

// A host that rotated a cluster's credentials signals it: the cluster's pipeline asks the client provider
// again, and switches every connection to what it returns (it does so on its own when the apiserver answers
// 401 Unauthorized). The status counts the rotations.
func ExampleController_RefreshCredentials() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The host's current credentials, by cluster ID.
	var (
		mu     sync.Mutex
		tokens = map[string]string{"cluster-a": "token-1"}
	)

	host, err := startExampleHost(ctx, func(_ context.Context, clusterID string) (*rest.Config, error) {
		mu.Lock()
		defer mu.Unlock()

		token, ok := tokens[clusterID]
		if !ok {
			return nil, fmt.Errorf("no credentials for cluster %s", clusterID)
		}

		return &rest.Config{Host: exampleAPIServer, BearerToken: token}, nil
	})
	if err != nil {
		fmt.Println(err)

		return
	}
	defer host.stop()

	cluster := clusters.NewCluster(clusters.DefaultNamespace, "cluster-a")
	cluster.TypedSpec().Value = &specs.ClusterSpec{HostFacts: true}

	if err = host.state.Create(ctx, cluster); err != nil {
		fmt.Println(err)

		return
	}

	// The cluster's pipeline runs (its apiserver cannot be reached here, which its status says).
	if _, err = host.waitStatus(ctx, "cluster-a", func(s *specs.ClusterStatusSpec) bool {
		return s.GetPhase() == clusters.PhaseAPIServerUnreachable
	}); err != nil {
		fmt.Println(err)

		return
	}

	mu.Lock()
	tokens["cluster-a"] = "token-2"
	mu.Unlock()

	host.ctrl.RefreshCredentials("cluster-a")

	status, err := host.waitStatus(ctx, "cluster-a", func(s *specs.ClusterStatusSpec) bool {
		return s.GetCredentialRotations() > 0
	})
	if err != nil {
		fmt.Println(err)

		return
	}

	fmt.Println("credential rotations:", status.GetCredentialRotations(), "at:", status.GetCredentialsRotatedAt() != nil)
	// Output:
	// credential rotations: 1 at: true
}

// A Cluster that cannot run as it is declared waits, failed, for a change: its status says why.
func Example_invalidCluster() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	host, err := startExampleHost(ctx, func(context.Context, string) (*rest.Config, error) {
		return &rest.Config{Host: exampleAPIServer}, nil
	})
	if err != nil {
		fmt.Println(err)

		return
	}
	defer host.stop()

	cluster := clusters.NewCluster(clusters.DefaultNamespace, "cluster-b")
	cluster.TypedSpec().Value = &specs.ClusterSpec{Controllers: []string{"cloud-nod"}}

	if err = host.state.Create(ctx, cluster); err != nil {
		fmt.Println(err)

		return
	}

	status, err := host.waitStatus(ctx, "cluster-b", func(s *specs.ClusterStatusSpec) bool {
		return s.GetPhase() == clusters.PhaseFailed
	})
	if err != nil {
		fmt.Println(err)

		return
	}

	fmt.Println("phase:", status.GetPhase())
	fmt.Println("last error:", status.GetLastError())
	// Output:
	// phase: failed
	// last error: unknown controller "cloud-nod" in --controllers (known: cloud-node, csr-approval, node-ipam, service-lb, node-lifecycle)
}

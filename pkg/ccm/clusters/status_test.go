package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

// statusOps is a host state that counts the reads and writes of ClusterStatus resources, by cluster.
type statusOps struct {
	state.CoreState

	mu  sync.Mutex
	ops map[resource.ID]int
}

func (s *statusOps) count(ptr resource.Pointer) {
	if ptr.Type() != clusters.ClusterStatusType {
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	s.ops[ptr.ID()]++
}

// take returns the counts so far, and starts counting afresh.
func (s *statusOps) take() map[resource.ID]int {
	s.mu.Lock()
	defer s.mu.Unlock()

	ops := s.ops
	s.ops = map[resource.ID]int{}

	return ops
}

func (s *statusOps) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) {
	s.count(ptr)

	return s.CoreState.Get(ctx, ptr, opts...) //nolint:wrapcheck
}

func (s *statusOps) Create(ctx context.Context, r resource.Resource, opts ...state.CreateOption) error {
	s.count(r.Metadata())

	return s.CoreState.Create(ctx, r, opts...) //nolint:wrapcheck
}

func (s *statusOps) Update(ctx context.Context, r resource.Resource, opts ...state.UpdateOption) error {
	s.count(r.Metadata())

	return s.CoreState.Update(ctx, r, opts...) //nolint:wrapcheck
}

func (s *statusOps) Destroy(ctx context.Context, ptr resource.Pointer, opts ...state.DestroyOption) error {
	s.count(ptr)

	return s.CoreState.Destroy(ctx, ptr, opts...) //nolint:wrapcheck
}

// startStatusHost is a host runtime with a ClustersController over a state that counts the status
// operations; the test's own reads and writes go to the same state uncounted.
func startStatusHost(ctx context.Context, t *testing.T, provider func(context.Context, string) (*rest.Config, error)) (*clustersHost, *statusOps) {
	t.Helper()

	logger := zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))

	ops := &statusOps{CoreState: namespaced.NewState(clusters.MemoryStateBuilder()), ops: map[resource.ID]int{}}
	h := &clustersHost{state: state.WrapCore(ops), uncounted: state.WrapCore(ops.CoreState)}

	require.NoError(t, clusters.RegisterResources(ctx, h.state, ""))

	host, err := runtime.NewRuntime(h.state, logger.Named("host"))
	require.NoError(t, err)

	h.ctrl, err = clusters.NewController(h.state, clusters.Options{ClientConfig: provider, Logger: logger})
	require.NoError(t, err)
	require.NoError(t, host.RegisterController(h.ctrl))

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() { done <- host.Run(runCtx) }()

	t.Cleanup(func() {
		cancel()

		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("host runtime: %v", err)
		}
	})

	return h, ops
}

// phase checks a status's phase, and that its reason contains reason (none if empty), with a since
// exactly when there is a reason.
func phase(want, reason string) func(*specs.ClusterStatusSpec) error {
	return func(s *specs.ClusterStatusSpec) error {
		ok := s.GetPhase() == want && strings.Contains(s.GetPhaseReason(), reason) &&
			(reason == "") == (s.GetPhaseReason() == "") && (reason == "") == (s.GetPhaseSince() == nil)
		if !ok {
			return fmt.Errorf("phase %s (%q since %v), want %s (%q)", s.GetPhase(), s.GetPhaseReason(), s.GetPhaseSince().AsTime(), want, reason)
		}

		return nil
	}
}

// TestClusterStatusSaysWhatFails: of six clusters on one apiserver, one is given credentials the apiserver
// refuses (a token it does not know: 401; then a service account's token without any role: 403), and one an
// apiserver address nothing listens at. Their statuses say so, with the apiserver's message or the
// connection's error and since when, and go back to running once the host's provider gives them good ones.
// While one cluster's status changes, the statuses of the others are neither read nor written: status
// updates cost O(clusters that changed).
func TestClusterStatusSaysWhatFails(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	env := testenv.Start(t)

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	closed := rest.CopyConfig(env.Config)
	closed.Host = "https://" + listener.Addr().String()
	require.NoError(t, listener.Close())

	healthy := []string{"c0", "c1", "c2", "c3"}
	configs := map[string]*rest.Config{"refused": env.Config, "down": closed}

	for _, id := range healthy {
		configs[id] = env.Config
	}

	var mu sync.Mutex

	provide := func(id string, cfg *rest.Config) {
		mu.Lock()
		defer mu.Unlock()

		configs[id] = cfg
	}

	h, ops := startStatusHost(ctx, t, func(_ context.Context, id string) (*rest.Config, error) {
		mu.Lock()
		defer mu.Unlock()

		return rest.CopyConfig(configs[id]), nil
	})

	spec := &specs.ClusterSpec{Controllers: []string{ccm.ControllerCloudNode}}

	for id := range configs {
		cluster := clusters.NewCluster(clusters.DefaultNamespace, id)
		cluster.TypedSpec().Value = spec
		require.NoError(t, h.uncounted.Create(ctx, cluster))
	}

	for _, id := range append([]string{"refused"}, healthy...) {
		h.waitStatus(t, id, phase(clusters.PhaseRunning, ""))
	}

	h.waitStatus(t, "down", phase(clusters.PhaseAPIServerUnreachable, "connection refused"))

	// The host's provider now returns a token the apiserver does not know, and the host says so.
	ops.take()

	before := time.Now()

	provide("refused", tokenConfig(env, "not-a-token"))
	h.ctrl.RefreshCredentials("refused")

	h.waitStatus(t, "refused", phase(clusters.PhaseCredentialsRefused, "401 Unauthorized"))

	status, err := safe.StateGet[*clusters.ClusterStatus](ctx, h.uncounted, clusters.NewClusterStatus(clusters.DefaultNamespace, "refused").Metadata())
	require.NoError(t, err)

	refused := status.TypedSpec().Value
	require.False(t, refused.GetPhaseSince().AsTime().Before(before.Truncate(time.Second)), "since the first refusal, after the rotation")
	require.EqualValues(t, 1, refused.GetCredentialRotations())

	changed := ops.take()
	require.Positive(t, changed["refused"], "the refused cluster's status was written")
	delete(changed, "refused")
	require.Empty(t, changed, "the statuses of the clusters that did not change were neither read nor written")

	// Good credentials again: the cluster runs, and its status says nothing of the refusal.
	provide("refused", env.Config)
	h.ctrl.RefreshCredentials("refused")
	h.waitStatus(t, "refused", phase(clusters.PhaseRunning, ""))

	// Credentials of a service account no role is bound to: the apiserver knows them, and forbids every
	// request; the status says what it said (a protobuf Status, as the pipeline's clients ask for).
	provide("refused", tokenConfig(env, roleLessToken(ctx, t, env, "no-rights")))
	h.ctrl.RefreshCredentials("refused")
	h.waitStatus(t, "refused", phase(clusters.PhaseCredentialsRefused, `403 Forbidden: `))
	h.waitStatus(t, "refused", phase(clusters.PhaseCredentialsRefused, `is forbidden: User "system:serviceaccount:kube-system:no-rights" cannot`))

	provide("refused", env.Config)
	h.ctrl.RefreshCredentials("refused")
	h.waitStatus(t, "refused", phase(clusters.PhaseRunning, ""))

	// The host gives the unreachable cluster its apiserver: the pipeline is built again for it, and runs.
	provide("down", env.Config)
	h.ctrl.RefreshCredentials("down")
	h.waitStatus(t, "down", phase(clusters.PhaseRunning, ""))

	changed = ops.take()
	for _, id := range healthy {
		require.Zero(t, changed[id], "the status of %s, which did not change, was neither read nor written", id)
	}
}

// roleLessToken creates a service account no role is bound to, and returns a token of it.
func roleLessToken(ctx context.Context, t *testing.T, env *testenv.Env, name string) string {
	t.Helper()

	accounts := env.Clientset().CoreV1().ServiceAccounts("kube-system")

	_, err := accounts.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)

	token, err := accounts.CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)

	return token.Status.Token
}

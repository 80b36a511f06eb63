package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
	"github.com/talos-ccm/talos-ccm/pkg/ccm/clusters"
)

// countingState counts the watches open on a state: all of them, and those of the clusters' namespaces.
type countingState struct {
	state.CoreState

	open atomic.Int64

	mu sync.Mutex
	// clusters counts the watches of the clusters' (prefixed) namespaces; changed is closed, and replaced,
	// whenever it changes.
	clusters int
	changed  chan struct{}
}

func (s *countingState) track(ctx context.Context, ns resource.Namespace, watch func() error) error {
	if err := watch(); err != nil {
		return err
	}

	cluster := strings.Contains(ns, clusters.NamespacePrefixSeparator)

	s.open.Add(1)
	s.addClusterWatches(cluster, 1)

	context.AfterFunc(ctx, func() {
		s.open.Add(-1)
		s.addClusterWatches(cluster, -1)
	})

	return nil
}

func (s *countingState) addClusterWatches(cluster bool, n int) {
	if !cluster {
		return
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	s.clusters += n

	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// clusterWatches returns how many watches of the clusters' namespaces are open, and a channel closed when
// that changes.
func (s *countingState) clusterWatches() (int, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.changed == nil {
		s.changed = make(chan struct{})
	}

	return s.clusters, s.changed
}

// waitNoClusterWatches waits until no watch of a cluster's namespace is open: those of removed clusters
// end once their pipelines stopped, and their namespaces are released then.
func (s *countingState) waitNoClusterWatches(ctx context.Context, t *testing.T) {
	t.Helper()

	for {
		n, changed := s.clusterWatches()
		if n == 0 {
			return
		}

		select {
		case <-ctx.Done():
			t.Fatalf("%d watches of the clusters' namespaces still open: %v", n, ctx.Err())
		case <-changed:
		}
	}
}

func (s *countingState) Watch(ctx context.Context, ptr resource.Pointer, ch chan<- state.Event, opts ...state.WatchOption) error {
	return s.track(ctx, ptr.Namespace(), func() error { return s.CoreState.Watch(ctx, ptr, ch, opts...) })
}

func (s *countingState) WatchKind(ctx context.Context, kind resource.Kind, ch chan<- state.Event, opts ...state.WatchKindOption) error {
	return s.track(ctx, kind.Namespace(), func() error { return s.CoreState.WatchKind(ctx, kind, ch, opts...) })
}

func (s *countingState) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	return s.track(ctx, kind.Namespace(), func() error { return s.CoreState.WatchKindAggregated(ctx, kind, ch, opts...) })
}

// releasingState is a host's state of its own (its watches counted) that releases the namespaces of
// removed clusters, as the NamespaceReleaser documentation tells such a host to.
type releasingState struct {
	state.State
	clusters.NamespaceReleaser
}

// clustersHost is a host runtime with a ClustersController and the facts controller, over a state whose
// watches are counted, and which releases the namespaces of removed clusters.
type clustersHost struct {
	state   state.State
	watches *countingState
	// uncounted is the same state, without counting: the test's own watches go there (they end after
	// the calls that started them returned).
	uncounted state.State
	ctrl      *clusters.Controller
	stop      func()
}

// startClustersHost starts a host whose logs of the given level and above go to the test's log.
func startClustersHost(ctx context.Context, t *testing.T, provider func(context.Context, string) (*rest.Config, error), level zapcore.Level) *clustersHost {
	t.Helper()

	logger := zaptest.NewLogger(t, zaptest.Level(level))

	namespaces := clusters.NewReleasableNamespaces(clusters.MemoryStateBuilder())
	watches := &countingState{CoreState: namespaces}
	hostState := releasingState{State: state.WrapCore(watches), NamespaceReleaser: namespaces}

	require.NoError(t, clusters.RegisterResources(ctx, hostState, ""))

	host, err := runtime.NewRuntime(hostState, logger.Named("host"))
	require.NoError(t, err)

	ctrl, err := clusters.NewController(hostState, clusters.Options{ClientConfig: provider, Logger: logger})
	require.NoError(t, err)

	require.NoError(t, host.RegisterController(ctrl))
	require.NoError(t, host.RegisterController(&factsController{clusters: true}))

	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)

	go func() { done <- host.Run(runCtx) }()

	h := &clustersHost{state: hostState, watches: watches, uncounted: state.WrapCore(namespaces), ctrl: ctrl}
	h.stop = sync.OnceFunc(func() {
		cancel()

		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("host runtime: %v", err)
		}
	})
	t.Cleanup(h.stop)

	return h
}

// declare creates or changes a Cluster.
func (h *clustersHost) declare(ctx context.Context, t *testing.T, id string, spec *specs.ClusterSpec) {
	t.Helper()

	cluster := clusters.NewCluster(clusters.DefaultNamespace, id)
	cluster.TypedSpec().Value = spec

	current, err := h.state.Get(ctx, cluster.Metadata())

	switch {
	case state.IsNotFoundError(err):
		require.NoError(t, h.state.Create(ctx, cluster))
	case err == nil:
		_, err = safe.StateUpdateWithConflicts(ctx, h.state, current.Metadata(), func(c *clusters.Cluster) error {
			c.TypedSpec().Value = spec

			return nil
		})
		require.NoError(t, err)
	default:
		require.NoError(t, err)
	}
}

// remove removes a Cluster the COSI way (clusters.Remove): it returns once the ClustersController released it.
func (h *clustersHost) remove(ctx context.Context, id string) error {
	return clusters.Remove(ctx, h.uncounted, "", id) //nolint:wrapcheck
}

// status returns a cluster's status, nil when there is none.
func (h *clustersHost) status(ctx context.Context, id string) (*specs.ClusterStatusSpec, error) {
	st, err := safe.StateGet[*clusters.ClusterStatus](ctx, h.state, clusters.NewClusterStatus(clusters.DefaultNamespace, id).Metadata())
	if state.IsNotFoundError(err) {
		return nil, nil //nolint:nilnil // No status yet.
	}

	if err != nil {
		return nil, err //nolint:wrapcheck
	}

	return st.TypedSpec().Value, nil
}

// waitStatus waits until check passes on a cluster's status, checking it at every change of the status.
func (h *clustersHost) waitStatus(t *testing.T, id string, check func(*specs.ClusterStatusSpec) error) {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	events := make(chan state.Event)
	require.NoError(t, h.uncounted.Watch(ctx, clusters.NewClusterStatus(clusters.DefaultNamespace, id).Metadata(), events))

	err := errors.New("no status")

	for {
		select {
		case <-ctx.Done():
			t.Fatalf("status of cluster %s: %v (%v)", id, err, ctx.Err())
		case ev := <-events:
			switch status, ok := ev.Resource.(*clusters.ClusterStatus); {
			case ev.Type == state.Errored:
				require.NoError(t, ev.Error, "watch of the status of cluster %s", id)
			case ev.Type == state.Destroyed || !ok:
				err = errors.New("no status")
			default:
				if err = check(status.TypedSpec().Value); err == nil {
					return
				}
			}
		}
	}
}

// leftovers lists what is left in the host's state of a cluster's prefix: the resources of every type the
// prefix's definitions named (read before the removal), and the definitions.
func (h *clustersHost) leftovers(ctx context.Context, prefix string, definitions []*meta.ResourceDefinition) ([]string, error) {
	definitionsKind := resource.NewMetadata(clusters.HostNamespace(prefix, meta.NamespaceName), meta.ResourceDefinitionType, "", resource.VersionUndefined)
	kinds := []resource.Kind{&definitionsKind}

	for _, rd := range definitions {
		md := resource.NewMetadata(clusters.HostNamespace(prefix, rd.TypedSpec().DefaultNamespace), rd.TypedSpec().Type, "", resource.VersionUndefined)
		kinds = append(kinds, &md)
	}

	var left []string

	for _, kind := range kinds {
		list, err := h.state.List(ctx, kind)
		if err != nil {
			return nil, err //nolint:wrapcheck
		}

		for _, r := range list.Items {
			left = append(left, fmt.Sprintf("%s %s/%s", r.Metadata().Type(), r.Metadata().Namespace(), r.Metadata().ID()))
		}
	}

	return left, nil
}

// definitions lists the resource definitions of the types a cluster's pipeline keeps under its prefix:
// RegisterResources registers them once in the host's meta namespace, and a pipeline registers none under
// its prefix.
func (h *clustersHost) definitions(ctx context.Context, t *testing.T, prefix string) []*meta.ResourceDefinition {
	t.Helper()

	prefixed, err := safe.StateList[*meta.ResourceDefinition](ctx, h.state,
		resource.NewMetadata(clusters.HostNamespace(prefix, meta.NamespaceName), meta.ResourceDefinitionType, "", resource.VersionUndefined))
	require.NoError(t, err)
	require.Zero(t, prefixed.Len(), "definitions registered under the prefix %q", prefix)

	list, err := safe.StateList[*meta.ResourceDefinition](ctx, h.state,
		resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, "", resource.VersionUndefined))
	require.NoError(t, err)

	var (
		own   []*meta.ResourceDefinition
		types []string
	)

	for rd := range list.All() {
		if typ := rd.TypedSpec().Type; typ != clusters.ClusterType && typ != clusters.ClusterStatusType {
			own = append(own, rd)
			types = append(types, typ)
		}
	}

	require.Contains(t, types, ccm.NodeTransformType, "the host's meta namespace defines talos-ccm's types")

	return own
}

// serviceAccountToken creates a service account bound to cluster-admin and returns a token of it.
func serviceAccountToken(ctx context.Context, t *testing.T, client kubernetes.Interface, name string) string {
	t.Helper()

	_, err := client.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)

	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "kube-system"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	expiration := int64(3600)

	token, err := client.CoreV1().ServiceAccounts("kube-system").CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiration}}, metav1.CreateOptions{})
	require.NoError(t, err)

	return token.Status.Token
}

// tokenConfig is the admin config of env with a bearer token instead of the admin's certificate.
func tokenConfig(env *testenv.Env, token string) *rest.Config {
	return &rest.Config{
		Host:            env.Config.Host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData},
	}
}

// TestClustersFromResources: a host with one runtime and one state serves three clusters it declares as
// Cluster resources, each with its own control plane; their Nodes are initialized from the facts the host
// feeds. One cluster's credentials rotate twice: once on the host's signal, once when the old credentials are
// refused (401) and talos-ccm asks the host's client provider again; its Nodes keep being initialized. One
// cluster is removed: its resources leave the host's state, its pipeline stops (a Node created then stays
// uninitialized), its status goes; re-added under the same ID, it initializes that Node.
func TestClustersFromResources(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))

	names := []string{"alpha", "beta", "gamma"}
	byName := map[string]*cluster{}

	for _, name := range names {
		c := &cluster{name: name, prefix: name + ":", env: testenv.Start(t)}
		c.machines = talossim.Generate(4, int64(len(byName)+7))

		for j := range c.machines {
			m := &c.machines[j]
			m.ProviderID = fmt.Sprintf("host://%s/%s", name, m.Name)
			m.Region, m.Zone, m.InstanceType = name+"-region", name+"-region-a", name+".large"
			m.NoPlatformMetadata = false
		}

		byName[name] = c
	}

	// beta's credentials are service account tokens, which the test rotates and revokes.
	beta := byName["beta"]

	var (
		tokenMu sync.Mutex
		token   = serviceAccountToken(ctx, t, beta.env.Clientset(), "ccm-1")
		asked   atomic.Int64
	)

	provider := func(_ context.Context, id string) (*rest.Config, error) {
		c, ok := byName[id]
		if !ok {
			return nil, fmt.Errorf("no cluster %q", id)
		}

		if id != "beta" {
			return rest.CopyConfig(c.env.Config), nil
		}

		asked.Add(1)

		tokenMu.Lock()
		defer tokenMu.Unlock()

		return tokenConfig(c.env, token), nil
	}

	h := startClustersHost(ctx, t, provider, zap.InfoLevel)

	var wg sync.WaitGroup

	runKubelets := func(c *cluster, machines []talossim.Machine) {
		kubelets, err := talossim.NewKubelets(c.env.Config, machines, talossim.KubeletOptions{Logger: logger.Named(c.name + "-kubelets")})
		require.NoError(t, err)

		wg.Go(func() {
			if err := kubelets.Run(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("kubelets of %s: %v", c.name, err)
			}
		})
	}

	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)

	spec := &specs.ClusterSpec{Controllers: []string{ccm.ControllerCloudNode, ccm.ControllerCSRApproval}, HostFacts: true}

	for _, name := range names {
		c := byName[name]

		// The last machine of each cluster joins later.
		for _, m := range c.machines[:3] {
			require.NoError(t, h.state.Create(ctx, newHostMachine(name, m)))
		}

		h.declare(ctx, t, name, spec)
		runKubelets(c, c.machines[:3])
	}

	for _, name := range names {
		c := byName[name]

		for _, m := range c.machines[:3] {
			waitNode(ctx, t, c, m.Name, func(n *corev1.Node) error { return checkNode(n, name, m) })
		}

		h.waitStatus(t, name, func(s *specs.ClusterStatusSpec) error {
			if s.GetPhase() != clusters.PhaseRunning || s.GetNodesInitialized() != 3 || s.GetNodesWaiting() != 0 || s.GetNamespacePrefix() != name+":" {
				return fmt.Errorf("status %v", s)
			}

			return nil
		})
	}

	// Rotation on the host's signal: a new token, and the host says so.
	tokenMu.Lock()
	token = serviceAccountToken(ctx, t, beta.env.Clientset(), "ccm-2")
	tokenMu.Unlock()

	h.ctrl.RefreshCredentials("beta")

	h.waitStatus(t, "beta", func(s *specs.ClusterStatusSpec) error {
		if s.GetCredentialRotations() != 1 {
			return fmt.Errorf("%d credential rotations", s.GetCredentialRotations())
		}

		return nil
	})

	// Rotation on refusal: the host rotates without a word and revokes the token in use; the next write is
	// refused, talos-ccm asks the provider again, and the late machine's Node is initialized all the same.
	askedBefore := asked.Load()

	tokenMu.Lock()
	revoked := token
	token = serviceAccountToken(ctx, t, beta.env.Clientset(), "ccm-3")
	tokenMu.Unlock()

	require.NoError(t, beta.env.Clientset().CoreV1().ServiceAccounts("kube-system").Delete(ctx, "ccm-2", metav1.DeleteOptions{}))

	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the revoked token is refused", func(ctx context.Context) error {
		client, err := kubernetes.NewForConfig(tokenConfig(beta.env, revoked))
		if err != nil {
			return err
		}

		if _, err = client.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("listing Nodes with the revoked token: %w", err)
		}

		return nil
	})

	late := beta.machines[3]
	require.NoError(t, h.state.Create(ctx, newHostMachine("beta", late)))
	runKubelets(beta, []talossim.Machine{late})
	waitNode(ctx, t, beta, late.Name, func(n *corev1.Node) error { return checkNode(n, "beta", late) })

	h.waitStatus(t, "beta", func(s *specs.ClusterStatusSpec) error {
		if s.GetCredentialRotations() != 2 || s.GetNodesInitialized() != 4 {
			return fmt.Errorf("%d credential rotations, %d Nodes initialized", s.GetCredentialRotations(), s.GetNodesInitialized())
		}

		return nil
	})
	require.Greater(t, asked.Load(), askedBefore, "the provider was asked again after the refusal")

	// gamma goes: its resources leave the host's state, and nothing of it runs any more.
	gamma := byName["gamma"]
	definitions := h.definitions(ctx, t, gamma.prefix)
	require.NotEmpty(t, definitions)

	left, err := h.leftovers(ctx, gamma.prefix, definitions)
	require.NoError(t, err)
	require.NotEmpty(t, left, "a running cluster has resources")

	require.NoError(t, h.remove(ctx, "gamma"))

	left, err = h.leftovers(ctx, gamma.prefix, definitions)
	require.NoError(t, err)
	require.Empty(t, left, "a removed cluster's resources are destroyed")

	status, err := h.status(ctx, "gamma")
	require.NoError(t, err)
	require.Nil(t, status, "a removed cluster has no status")

	// A machine that joins the removed cluster: nothing initializes its Node.
	lateGamma := gamma.machines[3]
	require.NoError(t, h.state.Create(ctx, newHostMachine("gamma", lateGamma)))
	runKubelets(gamma, []talossim.Machine{lateGamma})

	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the late Node registers", func(ctx context.Context) error {
		_, err := gamma.env.Clientset().CoreV1().Nodes().Get(ctx, lateGamma.Name, metav1.GetOptions{})

		return err //nolint:wrapcheck
	})

	testenv.Consistently(t, 3*time.Second, 200*time.Millisecond, "nothing initializes the removed cluster's Node", func(ctx context.Context) error {
		n, err := gamma.env.Clientset().CoreV1().Nodes().Get(ctx, lateGamma.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}

		if checkNode(n, "gamma", lateGamma) == nil {
			return errors.New("initialized")
		}

		return nil
	})

	// gamma again, under the same ID: it starts afresh and initializes the late Node.
	h.declare(ctx, t, "gamma", spec)
	waitNode(ctx, t, gamma, lateGamma.Name, func(n *corev1.Node) error { return checkNode(n, "gamma", lateGamma) })

	h.waitStatus(t, "gamma", func(s *specs.ClusterStatusSpec) error {
		if s.GetPhase() != clusters.PhaseRunning || s.GetNodesInitialized() != 4 {
			return fmt.Errorf("status %v", s)
		}

		return nil
	})

	// alpha ran through all of it untouched.
	h.waitStatus(t, "alpha", func(s *specs.ClusterStatusSpec) error {
		if s.GetPhase() != clusters.PhaseRunning || s.GetRestarts() != 0 || s.GetCredentialRotations() != 0 {
			return fmt.Errorf("status %v", s)
		}

		return nil
	})
}

// TestClustersLeakNothing adds, changes and removes 50 clusters in a shuffled order, removing some while they
// start or restart, and re-adding some under the same ID, in two rounds of new clusters: once a round's
// clusters are all removed, the host's state holds none of their resources nor their statuses; after the
// second round, the host's state has no more watches than after the first, the process runs none of the
// goroutines the second round started, and its live heap is back within leakHeapMargin of what it was
// after the first (the namespaces of the removed clusters were released, with their collections). The
// first round is there so that what a process keeps once it ran clusters at all is there before the
// count: client-go's process-wide goroutines, the descriptors the Go runtime keeps of the
// goroutines that ended (it reuses them, and never frees them: about 1.5 MiB for the round's 3,000 at
// most), the host's Cluster and ClusterStatus collections grown to the round's size.
//
// Not parallel: it counts the goroutines and the heap of the whole test process. It waits on events (the
// statuses and the watches it follows), not on time, except for goleak's short retries while the ended
// pipelines' goroutines return; it cannot run in a synctest bubble, since the pipelines talk to a real
// apiserver.
func TestClustersLeakNothing(t *testing.T) { //nolint:paralleltest // It counts the process's goroutines and heap.
	// The HTTP/2 client keeps the health check timer of a closed connection until it fires (the read idle
	// timeout, 75 s on a cluster's shared connection), and with it the connection and its transport
	// (golang/go#80920): the connection of a removed cluster is freed up to 75 s after it closed, not
	// leaked. Without the health check it is freed at once, and the heap can be counted without waiting.
	t.Setenv("HTTP2_READ_IDLE_TIMEOUT_SECONDS", "0")

	ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
	defer cancel()

	env := testenv.Start(t)
	provider := func(context.Context, string) (*rest.Config, error) { return rest.CopyConfig(env.Config), nil }

	h := startClustersHost(ctx, t, provider, zap.WarnLevel)

	leakRound(ctx, t, h, "a")
	h.watches.waitNoClusterWatches(ctx, t)

	goroutines, watches, heap := goleak.IgnoreCurrent(), h.watches.open.Load(), liveHeap()

	leakRound(ctx, t, h, "b")
	h.watches.waitNoClusterWatches(ctx, t)

	require.Equal(t, watches, h.watches.open.Load(), "watches of the host's state")

	// goleak.Find waits a little for goroutines that are ending; a pipeline's may take longer.
	settleCtx, settled := context.WithTimeout(ctx, 30*time.Second)
	defer settled()

	for err := goleak.Find(goroutines); err != nil; err = goleak.Find(goroutines) {
		require.NoError(t, settleCtx.Err(), "goroutines the clusters started: %v", err)
	}

	if now := liveHeap(); now > heap+leakHeapMargin {
		t.Errorf("live heap %d KiB after the second round of clusters was removed, %d KiB before it: %d KiB more than the margin of %d KiB",
			now>>10, heap>>10, (now-heap-leakHeapMargin)>>10, leakHeapMargin>>10)
	}
}

// leakRound is a round of TestClustersLeakNothing: 50 clusters named round00 to round49 are added, changed
// and removed, some while they start or restart, some re-added under the same ID; once they are all
// removed, nothing of theirs is left in the host's state.
func leakRound(ctx context.Context, t *testing.T, h *clustersHost, round string) {
	t.Helper()

	spec := &specs.ClusterSpec{Controllers: []string{ccm.ControllerCloudNode}}

	running := func(id string) {
		h.waitStatus(t, id, func(s *specs.ClusterStatusSpec) error {
			cluster, err := safe.StateGet[*clusters.Cluster](ctx, h.uncounted, clusters.NewCluster(clusters.DefaultNamespace, id).Metadata())
			if err != nil {
				return err
			}

			if s.GetPhase() != clusters.PhaseRunning || s.GetClusterVersion() != cluster.Metadata().Version().String() {
				return fmt.Errorf("phase %s at version %s, want running at %s", s.GetPhase(), s.GetClusterVersion(), cluster.Metadata().Version())
			}

			return nil
		})
	}

	removeAll := func(ids []string) {
		var wg sync.WaitGroup

		for _, id := range ids {
			wg.Go(func() { require.NoError(t, h.remove(ctx, id)) })
		}

		wg.Wait()
	}

	ids := make([]string, 50)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%02d", round, i)
	}

	rng := rand.New(rand.NewPCG(50, 50))
	rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })

	for _, id := range ids {
		h.declare(ctx, t, id, spec)
	}

	// Ten go while they start.
	removeAll(ids[:10])

	for _, id := range ids[10:] {
		running(id)
	}

	// The definitions the pipelines register, to look for leftovers of every type they name.
	definitions := h.definitions(ctx, t, ids[10]+":")

	// Twenty change: ten select another controller, ten another cluster name; five of each go while they
	// restart.
	changed := ids[10:30]
	for i, id := range changed {
		if i%2 == 0 {
			h.declare(ctx, t, id, &specs.ClusterSpec{Controllers: []string{ccm.ControllerCloudNode, ccm.ControllerNodeLifecycle}})
		} else {
			h.declare(ctx, t, id, &specs.ClusterSpec{Controllers: spec.GetControllers(), Config: &specs.ConfigSpec{ClusterName: "renamed-" + id}})
		}
	}

	removeAll(changed[:10])

	for _, id := range ids[20:] {
		running(id)
	}

	// Five come back under the same ID.
	for _, id := range ids[:5] {
		h.declare(ctx, t, id, spec)
	}

	for _, id := range ids[:5] {
		running(id)
	}

	removeAll(append(slices.Clone(ids[:5]), ids[20:]...))

	for _, id := range ids {
		left, err := h.leftovers(ctx, id+":", definitions)
		require.NoError(t, err)
		require.Empty(t, left, "cluster %s", id)

		status, err := h.status(ctx, id)
		require.NoError(t, err)
		require.Nil(t, status, "cluster %s", id)
	}
}

// leakHeapMargin is how much more live heap TestClustersLeakNothing allows after its second round of
// clusters than before it: what the runtime and the host may still hold. Without the release of the
// removed clusters' namespaces, a round leaves about 4.5 MiB behind (the collections of each cluster's
// namespaces, with the COSI runtime's in-memory state and its history of events); with it, 30 to 120 KiB.
const leakHeapMargin = 1 << 20

// liveHeap is the heap held by reachable objects, once the garbage collector ran twice: what a sync.Pool
// held survives one collection, and so does what a cleanup (client-go's cache of transports has some)
// releases once its object was collected.
func liveHeap() uint64 {
	goruntime.GC()
	goruntime.GC()

	var stats goruntime.MemStats
	goruntime.ReadMemStats(&stats)

	return stats.HeapAlloc
}

// TestClustersSpecChanges: a Cluster the controller cannot run says why in its status, and runs once fixed;
// a second Cluster with a prefix already in use waits, failed, until the prefix is free; a changed prefix
// moves the cluster's resources (the old prefix is emptied); a Cluster that keeps its resources leaves them
// in the host's state when removed, and runs over them when added again.
func TestClustersSpecChanges(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	env := testenv.Start(t)
	provider := func(context.Context, string) (*rest.Config, error) { return rest.CopyConfig(env.Config), nil }
	h := startClustersHost(ctx, t, provider, zap.InfoLevel)

	failedWith := func(want string) func(*specs.ClusterStatusSpec) error {
		return func(s *specs.ClusterStatusSpec) error {
			if s.GetPhase() != clusters.PhaseFailed || !strings.Contains(s.GetLastError(), want) {
				return fmt.Errorf("phase %s, error %q; want failed with %q", s.GetPhase(), s.GetLastError(), want)
			}

			return nil
		}
	}

	runningAt := func(prefix string) func(*specs.ClusterStatusSpec) error {
		return func(s *specs.ClusterStatusSpec) error {
			if s.GetPhase() != clusters.PhaseRunning || s.GetNamespacePrefix() != prefix {
				return fmt.Errorf("phase %s at %q, want running at %q", s.GetPhase(), s.GetNamespacePrefix(), prefix)
			}

			return nil
		}
	}

	// A machine's facts and its Node, so that the cluster has resources of its own.
	machine := talossim.Generate(1, 3)[0]
	machine.ProviderID, machine.Region, machine.Zone, machine.InstanceType = "host://kept/0", "kept-region", "kept-region-a", "kept.large"
	machine.NoPlatformMetadata = false
	require.NoError(t, h.state.Create(ctx, newHostMachine("kept", machine)))

	logger := zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))

	kubelets, err := talossim.NewKubelets(env.Config, []talossim.Machine{machine}, talossim.KubeletOptions{Logger: logger})
	require.NoError(t, err)

	var wg sync.WaitGroup

	wg.Go(func() {
		if err := kubelets.Run(ctx); err != nil && ctx.Err() == nil {
			t.Errorf("kubelets: %v", err)
		}
	})

	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)

	// Invalid, then fixed.
	h.declare(ctx, t, "kept", &specs.ClusterSpec{Controllers: []string{"cloud-nodes"}, KeepResources: true})
	h.waitStatus(t, "kept", failedWith(`unknown controller "cloud-nodes"`))

	spec := &specs.ClusterSpec{Controllers: []string{ccm.ControllerCloudNode}, HostFacts: true, KeepResources: true}
	h.declare(ctx, t, "kept", spec)
	h.waitStatus(t, "kept", runningAt("kept:"))

	c := &cluster{name: "kept", env: env}
	waitNode(ctx, t, c, machine.Name, func(n *corev1.Node) error { return checkNode(n, "kept", machine) })

	// Another cluster wants the same prefix: it waits until the prefix is free. (The test's host feeds it
	// no machine: its facts replace kept's, which its Node no longer needs.)
	h.declare(ctx, t, "other", &specs.ClusterSpec{NamespacePrefix: "kept:", Controllers: []string{ccm.ControllerCloudNode}})
	h.waitStatus(t, "other", failedWith(`namespace prefix "kept:" is the prefix of cluster "kept"`))

	definitions := h.definitions(ctx, t, "kept:")

	// kept goes, keeping its resources; other gets the prefix and runs over them.
	require.NoError(t, h.remove(ctx, "kept"))

	left, err := h.leftovers(ctx, "kept:", definitions)
	require.NoError(t, err)
	require.Contains(t, left, fmt.Sprintf("%s kept:node/%s", ccm.NodeTransformType, machine.Name), "the removed cluster kept its resources")

	h.waitStatus(t, "other", runningAt("kept:"))
	require.NoError(t, h.remove(ctx, "other"))

	left, err = h.leftovers(ctx, "kept:", definitions)
	require.NoError(t, err)
	require.Empty(t, left, "a cluster that does not keep its resources leaves none, even those another kept")

	// kept again, then moved to another prefix: the old one is emptied, as kept does not keep resources
	// any more.
	h.declare(ctx, t, "kept", spec)
	h.waitStatus(t, "kept", runningAt("kept:"))

	h.declare(ctx, t, "kept", &specs.ClusterSpec{NamespacePrefix: "moved:", Controllers: spec.GetControllers(), HostFacts: true})
	h.waitStatus(t, "kept", runningAt("moved:"))

	left, err = h.leftovers(ctx, "kept:", definitions)
	require.NoError(t, err)
	require.Empty(t, left, "the old prefix is emptied")

	testenv.Eventually(t, time.Minute, 100*time.Millisecond, "the moved cluster's decisions", func(ctx context.Context) error {
		_, err := h.state.Get(ctx, resource.NewMetadata(clusters.HostNamespace("moved:", ccm.NodeNamespace), ccm.NodeTransformType, machine.Name, resource.VersionUndefined))

		return err //nolint:wrapcheck
	})
}

package clusters_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/rtestutils"
	"github.com/cosi-project/runtime/pkg/resource/typed"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"
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

// The host's own resource: one machine of one of its clusters, as an inventory such as Omni's knows it.
const (
	hostMachineType                     = resource.Type("HostMachines.test.example.com")
	hostNamespace    resource.Namespace = "inventory"
	uninitializedKey                    = "node.cloudprovider.kubernetes.io/uninitialized"
)

type hostMachineSpec struct {
	Cluster string
	Machine talossim.Machine
}

func (s hostMachineSpec) DeepCopy() hostMachineSpec {
	return hostMachineSpec{Cluster: s.Cluster, Machine: s.Machine.Clone()}
}

type hostMachineExtension struct{}

func (hostMachineExtension) ResourceDefinition() meta.ResourceDefinitionSpec {
	return meta.ResourceDefinitionSpec{Type: hostMachineType, DefaultNamespace: hostNamespace}
}

type hostMachine = typed.Resource[hostMachineSpec, hostMachineExtension]

func newHostMachine(cluster string, m talossim.Machine) *hostMachine {
	return typed.NewResource[hostMachineSpec, hostMachineExtension](
		resource.NewMetadata(hostNamespace, hostMachineType, cluster+"/"+m.Name, resource.VersionUndefined),
		hostMachineSpec{Cluster: cluster, Machine: m},
	)
}

// factsController is the host's controller: it writes every machine of its inventory as talos-ccm facts
// into the prefixed talos namespace of the machine's cluster in the host's own state, and destroys the
// facts of machines that left the inventory. The facts are outputs of the host's runtime, as any of its
// resources; the clusters' runtimes only read them. It uses only pkg/ccm, the specs and the COSI runtime.
type factsController struct {
	// prefixes are the clusters' namespace prefixes, by cluster name.
	prefixes map[string]string
	// clusters adds the clusters declared as Cluster resources that are not being removed (a removed
	// cluster's facts are the ClustersController's to destroy with the rest of its resources).
	clusters bool
}

func (ctrl *factsController) Name() string { return "host.FactsController" }

func (ctrl *factsController) Inputs() []controller.Input {
	inputs := []controller.Input{{Namespace: hostNamespace, Type: hostMachineType, Kind: controller.InputWeak}}

	if ctrl.clusters {
		inputs = append(inputs, controller.Input{Namespace: clusters.DefaultNamespace, Type: clusters.ClusterType, Kind: controller.InputWeak})
	}

	return inputs
}

func (ctrl *factsController) Outputs() []controller.Output {
	return []controller.Output{
		{Type: ccm.PlatformMetadataType, Kind: controller.OutputExclusive},
		{Type: ccm.MachineAddressesType, Kind: controller.OutputExclusive},
	}
}

func (ctrl *factsController) Run(ctx context.Context, r controller.Runtime, _ *zap.Logger) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.EventCh():
		}

		machines, err := safe.ReaderListAll[*hostMachine](ctx, r)
		if err != nil {
			return fmt.Errorf("failed to list machines: %w", err)
		}

		wanted := map[string]map[string]talossim.Machine{}
		for m := range machines.All() {
			spec := m.TypedSpec()
			if wanted[spec.Cluster] == nil {
				wanted[spec.Cluster] = map[string]talossim.Machine{}
			}

			wanted[spec.Cluster][spec.Machine.Name] = spec.Machine
		}

		prefixes, err := ctrl.currentPrefixes(ctx, r)
		if err != nil {
			return err
		}

		for cluster, prefix := range prefixes {
			if err = writeFacts(ctx, r, clusters.HostNamespace(prefix, ccm.TalosNamespace), wanted[cluster]); err != nil {
				return fmt.Errorf("failed to write the facts of cluster %s: %w", cluster, err)
			}
		}
	}
}

// currentPrefixes are the prefixes of the clusters to feed, by cluster name.
func (ctrl *factsController) currentPrefixes(ctx context.Context, r controller.Runtime) (map[string]string, error) {
	prefixes := maps.Clone(ctrl.prefixes)
	if !ctrl.clusters {
		return prefixes, nil
	}

	if prefixes == nil {
		prefixes = map[string]string{}
	}

	declared, err := safe.ReaderList[*clusters.Cluster](ctx, r, clusters.NewCluster(clusters.DefaultNamespace, "").Metadata())
	if err != nil {
		return nil, fmt.Errorf("failed to list clusters: %w", err)
	}

	for cluster := range declared.All() {
		if cluster.Metadata().Phase() != resource.PhaseRunning {
			continue
		}

		prefix := cluster.TypedSpec().Value.GetNamespacePrefix()
		if prefix == "" {
			prefix = cluster.Metadata().ID() + clusters.NamespacePrefixSeparator
		}

		prefixes[cluster.Metadata().ID()] = prefix
	}

	return prefixes, nil
}

// writeFacts writes the facts of machines into the namespace ns of the host's state, and destroys the
// others there.
func writeFacts(ctx context.Context, r controller.Runtime, ns resource.Namespace, machines map[string]talossim.Machine) error {
	for name, m := range machines {
		if err := safe.WriterModify(ctx, r, ccm.NewPlatformMetadataIn(ns, name), func(r *ccm.PlatformMetadata) error {
			r.TypedSpec().Value = platformMetadata(m)

			return nil
		}); err != nil {
			return err
		}

		if err := safe.WriterModify(ctx, r, ccm.NewMachineAddressesIn(ns, name), func(r *ccm.MachineAddresses) error {
			r.TypedSpec().Value = machineAddresses(m)

			return nil
		}); err != nil {
			return err
		}
	}

	// Facts of machines that are gone.
	pms, err := safe.ReaderList[*ccm.PlatformMetadata](ctx, r, ccm.NewPlatformMetadataIn(ns, "").Metadata())
	if err != nil {
		return err
	}

	mas, err := safe.ReaderList[*ccm.MachineAddresses](ctx, r, ccm.NewMachineAddressesIn(ns, "").Metadata())
	if err != nil {
		return err
	}

	var gone []resource.Pointer

	for r := range pms.All() {
		if _, ok := machines[r.Metadata().ID()]; !ok {
			gone = append(gone, r.Metadata())
		}
	}

	for r := range mas.All() {
		if _, ok := machines[r.Metadata().ID()]; !ok {
			gone = append(gone, r.Metadata())
		}
	}

	for _, ptr := range gone {
		if err = r.Destroy(ctx, ptr); err != nil && !state.IsNotFoundError(err) {
			return err
		}
	}

	return nil
}

func platformMetadata(m talossim.Machine) *specs.PlatformMetadataSpec {
	return &specs.PlatformMetadataSpec{
		Nodename:            m.Name,
		Platform:            m.Platform,
		Hostname:            m.Hostname(),
		Region:              m.Region,
		Zone:                m.Zone,
		InstanceType:        m.InstanceType,
		InstanceId:          m.InstanceID,
		ProviderId:          m.ProviderID,
		Spot:                m.Spot,
		HasPlatformMetadata: true,
	}
}

func machineAddresses(m talossim.Machine) *specs.MachineAddressesSpec {
	out := &specs.MachineAddressesSpec{Nodename: m.Name}

	if len(m.NodeIPs) > 0 {
		out.NodeIp = m.NodeIPs[0].String()
	}

	for _, a := range m.Addresses {
		family := "inet4"
		if a.Prefix.Addr().Is6() {
			family = "inet6"
		}

		scope := a.Scope
		if scope == "" {
			scope = "global"
		}

		out.Addresses = append(out.Addresses, &specs.MachineAddress{
			Address: a.Prefix.String(), LinkName: a.LinkName, Scope: scope, Family: family,
		})
	}

	return out
}

// cluster is one embedded talos-ccm and its control plane.
type cluster struct {
	name   string
	prefix string
	env    *testenv.Env
	// view is the cluster's prefixed view of the host's state, as its pipeline sees it.
	view     state.State
	machines []talossim.Machine
}

// hostBackends is the host's namespaced state builder: it routes the namespaces that talos-ccm persists to
// one backend (a database in a real host; memory here) and the others to memory, and records every
// namespace the state was asked for.
type hostBackends struct {
	persisted map[resource.Namespace]bool
	memory    namespaced.StateBuilder
	decisions namespaced.StateBuilder

	mu   sync.Mutex
	used map[resource.Namespace]bool
}

func newHostBackends(t *testing.T, prefixes ...string) *hostBackends {
	t.Helper()

	b := &hostBackends{
		persisted: map[resource.Namespace]bool{},
		memory:    clusters.MemoryStateBuilder(),
		decisions: inmem.Build,
		used:      map[resource.Namespace]bool{},
	}

	for _, prefix := range prefixes {
		namespaces, err := clusters.PrefixedNamespaces(prefix)
		require.NoError(t, err)

		for _, ns := range namespaces {
			b.persisted[ns.Name] = ns.Persisted
		}
	}

	return b
}

func (b *hostBackends) build(ns resource.Namespace) state.CoreState { //nolint:ireturn
	b.mu.Lock()
	b.used[ns] = true
	b.mu.Unlock()

	if b.persisted[ns] {
		return b.decisions(ns)
	}

	return b.memory(ns)
}

func (b *hostBackends) namespaces() map[resource.Namespace]bool {
	b.mu.Lock()
	defer b.mu.Unlock()

	return maps.Clone(b.used)
}

// TestEmbedTwoClusters: a host with one state and one runtime of its own embeds talos-ccm for two
// clusters with the clusters Controller: each cluster's pipeline runs in a talos-ccm runtime over the
// cluster's prefixed view of the host's state, next to the host's own controller that feeds the facts of five machines per cluster into that cluster's prefixed talos
// namespace. Both clusters have
// Nodes of the same names, with different facts: each cluster's Nodes are initialized from its own facts
// only. Removing a machine from the host's inventory destroys its facts, and its NodeTransform goes back to
// pending in that cluster only. A cluster's view reaches neither the other cluster's resources nor the
// host's. No talosconfig is given: the Talos source is off and no Talos API is contacted.
func TestEmbedTwoClusters(t *testing.T) {
	t.Parallel()

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	logger := zaptest.NewLogger(t)

	all := []*cluster{{name: "alpha", prefix: "alpha:"}, {name: "beta", prefix: "beta:"}}
	prefixes := map[string]string{}
	configs := map[string]*rest.Config{}

	for _, c := range all {
		prefixes[c.name] = c.prefix
	}

	backends := newHostBackends(t, slices.Collect(maps.Values(prefixes))...)
	hostState := state.WrapCore(namespaced.NewState(backends.build))

	require.NoError(t, clusters.RegisterResources(ctx, hostState, ""))

	host, err := runtime.NewRuntime(hostState, logger.Named("host"))
	require.NoError(t, err)
	require.NoError(t, host.RegisterController(&factsController{prefixes: prefixes}))

	ctrl, err := clusters.NewController(hostState, clusters.Options{
		ClientConfig: func(_ context.Context, id string) (*rest.Config, error) { return configs[id], nil },
		Logger:       logger,
	})
	require.NoError(t, err)
	require.NoError(t, host.RegisterController(ctrl))

	for i, c := range all {
		c.env = testenv.Start(t)
		configs[c.name] = c.env.Config

		// The same Node names in both clusters, with facts that tell the clusters apart.
		c.machines = talossim.Generate(5, 42)
		for j := range c.machines {
			m := &c.machines[j]
			m.ProviderID = fmt.Sprintf("host://%s/%s", c.name, m.Name)
			m.Region = c.name + "-region"
			m.Zone = c.name + "-region-a"
			m.InstanceType = fmt.Sprintf("%s.type%d", c.name, i)
			m.NoPlatformMetadata = false
		}

		c.view, err = cosistate.NewPrefixedState(hostState, c.prefix)
		require.NoError(t, err)

		declared := clusters.NewCluster(clusters.DefaultNamespace, c.name)
		declared.TypedSpec().Value = &specs.ClusterSpec{HostFacts: true}
		require.NoError(t, hostState.Create(ctx, declared))
	}

	var wg sync.WaitGroup

	runCtx, stop := context.WithCancel(ctx)
	errs := make(chan error, len(all)+1) // the host runtime, with every pipeline, and each cluster's kubelets

	run := func(f func(context.Context) error) {
		wg.Add(1)

		go func() {
			defer wg.Done()

			errs <- f(runCtx)
		}()
	}

	t.Cleanup(func() {
		stop()
		wg.Wait()
		close(errs)

		for err := range errs {
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Error(err)
			}
		}
	})

	run(host.Run)

	for _, c := range all {
		for _, m := range c.machines {
			require.NoError(t, hostState.Create(ctx, newHostMachine(c.name, m)))
		}

		kubelets, err := talossim.NewKubelets(c.env.Config, c.machines, talossim.KubeletOptions{Logger: logger.Named(c.name + "-kubelets")})
		require.NoError(t, err)

		run(func(ctx context.Context) error {
			if err := kubelets.Run(ctx); err != nil && ctx.Err() == nil {
				return err
			}

			return nil
		})
	}

	for _, c := range all {
		for _, m := range c.machines {
			waitNode(ctx, t, c, m.Name, func(n *corev1.Node) error {
				return checkNode(n, c.name, m)
			})
		}
	}

	// The first machine of alpha leaves the host's inventory.
	alpha, beta := all[0], all[1]
	gone := alpha.machines[0].Name

	require.NoError(t, hostState.Destroy(ctx, newHostMachine(alpha.name, alpha.machines[0]).Metadata()))

	rtestutils.AssertNoResource[*ccm.PlatformMetadata](ctx, t, alpha.view, gone)
	rtestutils.AssertNoResource[*ccm.MachineAddresses](ctx, t, alpha.view, gone)
	rtestutils.AssertResource(ctx, t, alpha.view, gone, func(r *ccm.NodeTransform, asrt *assert.Assertions) {
		asrt.False(r.TypedSpec().Value.GetInitialize())
		asrt.Contains(r.TypedSpec().Value.GetPending(), "waiting for the machine's Talos facts")
	})

	// The other cluster's machine of the same name keeps its facts and its decision.
	rtestutils.AssertResource(ctx, t, beta.view, gone, func(r *ccm.NodeTransform, asrt *assert.Assertions) {
		asrt.True(r.TypedSpec().Value.GetInitialize())
		asrt.Empty(r.TypedSpec().Value.GetPending())
		asrt.Equal(beta.machines[0].ProviderID, r.TypedSpec().Value.GetProviderId())
	})

	rtestutils.AssertResource(ctx, t, beta.view, gone, func(r *ccm.PlatformMetadata, asrt *assert.Assertions) {
		asrt.Equal(beta.name+"-region", r.TypedSpec().Value.GetRegion())
	})

	// The Node keeps what it was initialized with: a providerID never changes.
	node, err := alpha.env.Clientset().CoreV1().Nodes().Get(ctx, gone, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, alpha.machines[0].ProviderID, node.Spec.ProviderID)

	checkIsolation(ctx, t, hostState, backends, alpha, beta)
}

// checkIsolation checks that the clusters' pipelines stayed within their prefixes: alpha's view lists only
// alpha's facts, cannot read or write beta's resources nor the host's own, and the host's state holds no
// namespace but the host's own and the two clusters' prefixed ones.
func checkIsolation(ctx context.Context, t *testing.T, hostState state.State, backends *hostBackends, alpha, beta *cluster) {
	t.Helper()

	view := alpha.view

	facts, err := safe.StateListAll[*ccm.PlatformMetadata](ctx, view)
	require.NoError(t, err)
	assert.Equal(t, len(alpha.machines)-1, facts.Len())

	for r := range facts.All() {
		assert.Equal(t, alpha.name+"-region", r.TypedSpec().Value.GetRegion(), r.Metadata().ID())
	}

	betaFacts := clusters.HostNamespace(beta.prefix, ccm.TalosNamespace)
	betaDecisions := clusters.HostNamespace(beta.prefix, ccm.NodeNamespace)

	for name, call := range map[string]func() error{
		"read beta's facts": func() error {
			_, err := view.Get(ctx, ccm.NewPlatformMetadataIn(betaFacts, beta.machines[1].Name).Metadata())

			return err
		},
		"list beta's decisions": func() error {
			_, err := view.List(ctx, resource.NewMetadata(betaDecisions, ccm.NodeTransformType, "", resource.VersionUndefined))

			return err
		},
		"write beta's facts": func() error {
			return view.Create(ctx, ccm.NewPlatformMetadataIn(betaFacts, "intruder"))
		},
		"destroy beta's facts": func() error {
			return view.Destroy(ctx, ccm.NewPlatformMetadataIn(betaFacts, beta.machines[1].Name).Metadata())
		},
		"watch beta's facts": func() error {
			return view.WatchKind(ctx, ccm.NewPlatformMetadataIn(betaFacts, "").Metadata(), make(chan state.Event))
		},
		"read the host's inventory": func() error {
			_, err := view.Get(ctx, newHostMachine(beta.name, beta.machines[1]).Metadata())

			return err
		},
	} {
		err := call()
		assert.ErrorIs(t, err, cosistate.ErrNamespaceOutsideView, name)
	}

	_, err = hostState.Get(ctx, ccm.NewPlatformMetadataIn(betaFacts, "intruder").Metadata())
	assert.True(t, state.IsNotFoundError(err), "alpha wrote into beta's namespace: %v", err)

	rtestutils.AssertResource(ctx, t, beta.view, beta.machines[1].Name, func(r *ccm.PlatformMetadata, asrt *assert.Assertions) {
		asrt.Equal(beta.name+"-region", r.TypedSpec().Value.GetRegion())
	})

	// The host's own: its inventory, the Clusters, and the definitions of both.
	allowed := map[resource.Namespace]bool{hostNamespace: true, clusters.DefaultNamespace: true, "meta": true}

	for _, c := range []*cluster{alpha, beta} {
		namespaces, err := clusters.PrefixedNamespaces(c.prefix)
		require.NoError(t, err)

		for _, ns := range namespaces {
			allowed[ns.Name] = true
		}
	}

	used := backends.namespaces()

	for ns := range used {
		assert.True(t, allowed[ns], "namespace %q of the host's state is neither the host's nor a cluster's", ns)
	}

	for _, c := range []*cluster{alpha, beta} {
		// Not "meta": the definitions are the host's, once (RegisterResources).
		for _, ns := range []resource.Namespace{ccm.TalosNamespace, ccm.KubeNamespace, ccm.NodeNamespace, ccm.SinkNamespace} {
			assert.True(t, used[clusters.HostNamespace(c.prefix, ns)], "cluster %s never used %s", c.name, ns)
		}
	}
}

// checkNode says what is not yet as the cluster's own facts want it on the Node.
func checkNode(n *corev1.Node, clusterName string, m talossim.Machine) error {
	for _, taint := range n.Spec.Taints {
		if taint.Key == uninitializedKey {
			return errors.New("still uninitialized")
		}
	}

	if n.Spec.ProviderID != m.ProviderID {
		return fmt.Errorf("providerID %q, want %q", n.Spec.ProviderID, m.ProviderID)
	}

	for key, want := range map[string]string{
		"topology.kubernetes.io/region":                m.Region,
		"topology.kubernetes.io/zone":                  m.Zone,
		"node.kubernetes.io/instance-type":             m.InstanceType,
		"node.cloudprovider.kubernetes.io/clustername": clusterName,
		"node.cloudprovider.kubernetes.io/platform":    m.Platform,
	} {
		if got := n.Labels[key]; got != want {
			return fmt.Errorf("label %s=%q, want %q", key, got, want)
		}
	}

	internal := netip.Addr{}
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			internal = netip.MustParseAddr(a.Address)

			break
		}
	}

	if len(m.NodeIPs) > 0 && internal != m.NodeIPs[0] {
		return fmt.Errorf("InternalIP %s, want %s", internal, m.NodeIPs[0])
	}

	return nil
}

// waitNode waits until check passes on the cluster's Node, or fails the test with its last complaint.
func waitNode(ctx context.Context, t *testing.T, c *cluster, name string, check func(*corev1.Node) error) {
	t.Helper()

	var last error

	for {
		n, err := c.env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			last = check(n)
		} else {
			last = err
		}

		if last == nil {
			return
		}

		select {
		case <-ctx.Done():
			t.Fatalf("cluster %s, node %s: %v", c.name, name, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

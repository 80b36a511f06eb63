package e2e_test

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/cosi-project/state-sqlite/pkg/sqlitexx"
	"github.com/cosi-project/state-sqlite/pkg/state/impl/sqlite"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/resources/ipam"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// TestPodCIDRAllocationSurvivesKill runs the talos-ccm binary with a state directory, kills it (SIGKILL)
// while it is handing out pod CIDRs, deletes Nodes while it is down, and starts it again on the same
// state: every Node ends up with pod CIDRs, none twice, and the allocations are exactly those of the Nodes
// that exist (nothing leaked by the kill or by the deletions).
func TestPodCIDRAllocationSurvivesKill(t *testing.T) {
	machines := fleet("ipamkill", 300, 91)
	_, srv := talossim.StartTest(t, machines)

	bin := buildCCM(t)
	kubeconfig := env.KubeconfigFile(t)
	stateDir := t.TempDir()
	socket := filepath.Join(socketDir(t), "ccm.sock")

	start := func(name string) *exec.Cmd {
		return startCCMProcess(t, bin, name,
			"--kubeconfig", kubeconfig,
			"--talosconfig", srv.TalosconfigPath(),
			"--state-dir", stateDir,
			"--api-listen", socket,
			"--metrics-bind-address", "0",
			"--health-probe-bind-address", "0",
			"--leader-elect=false",
			"--controllers", "node-ipam",
			"--allocate-node-cidrs",
			"--cluster-cidr", "10.128.0.0/14",
			// Slow writes, so that the kill lands while Nodes are still waiting for their pod CIDRs.
			"--kube-api-qps", "60", "--kube-api-burst", "5",
		)
	}

	withPodCIDRs := func() map[string][]string {
		list, err := env.Clientset().CoreV1().Nodes().List(t.Context(), metav1.ListOptions{})
		require.NoError(t, err)

		out := map[string][]string{}

		for _, n := range list.Items {
			if len(n.Spec.PodCIDRs) > 0 {
				out[n.Name] = n.Spec.PodCIDRs
			}
		}

		return out
	}

	first := start("first")

	kubelets := joinNodes(t, machines)

	testenv.Eventually(t, 90*time.Second, 20*time.Millisecond, "the first process allocates 30 pod CIDRs", func(context.Context) error {
		if n := len(withPodCIDRs()); n < 30 {
			return fmt.Errorf("%d Nodes with pod CIDRs", n)
		}

		return nil
	})

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))
	first.Wait() //nolint:errcheck

	before := withPodCIDRs()

	// What the killed process had decided, as persisted.
	persisted := map[string]string{}

	st, closeState := openStateDB(t, filepath.Join(stateDir, app.StateFileName))

	for id, a := range ipAllocations(t.Context(), st, "node/ipamkill-") {
		if a.GetState() == ipam.StateAllocated {
			_, name, _, _ := ipam.ParseAllocationID(id)
			persisted[name] = a.GetAddress()
		}
	}

	closeState()

	t.Logf("killed after %d of %d Nodes got their pod CIDRs, with %d allocations persisted", len(before), len(machines), len(persisted))
	require.Less(t, len(before), len(machines), "the kill must land in the middle of the allocation")

	// While it is down, the kubelets finish registering (the kill may come before the last of them did), and
	// Nodes go away: some with pod CIDRs, some that had an allocation but no CIDR yet.
	select {
	case <-kubelets.Registered():
	case <-time.After(90 * time.Second):
		t.Fatal("the kubelets did not register every Node within 90 s")
	}

	deleted := map[string]bool{}

	for i, m := range machines {
		if i%30 != 7 {
			continue
		}

		require.NoError(t, env.Clientset().CoreV1().Nodes().Delete(t.Context(), m.Name, metav1.DeleteOptions{}))

		deleted[m.Name] = true
	}

	var live []string

	for _, m := range machines {
		if !deleted[m.Name] {
			live = append(live, m.Name)
		}
	}

	// The case this test is for: decisions persisted before the kill but not applied yet, on Nodes that
	// still exist. The node-ipam writer's rate limit (a burst of 5, 60 a second) is far slower than the
	// allocator, so the allocator is always ahead when the kill lands.
	var unapplied []string

	for name := range persisted {
		if _, applied := before[name]; !applied && !deleted[name] {
			unapplied = append(unapplied, name)
		}
	}

	t.Logf("%d allocations persisted but not applied at the kill, on Nodes that stay", len(unapplied))
	require.NotEmpty(t, unapplied, "the kill must land between persisting an allocation and applying it")

	start("second")

	waitNodes(t, live, 120*time.Second, hasPodCIDRs)

	after := assertDistinctPodCIDRs(t, live)

	for name, c := range before {
		if !deleted[name] {
			assert.Equal(t, c, after[name], name)
		}
	}

	// A decision persisted before the kill is what the Node gets, even when it was not applied yet.
	for name, addr := range persisted {
		if !deleted[name] {
			assert.Equal(t, addr, after[name][0], name)
		}
	}

	// No leak: one allocation per existing Node, equal to its spec.podCIDRs.
	st = stateClient(t, socket)

	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "the allocations are exactly those of the existing Nodes", func(ctx context.Context) error {
		allocs := ipAllocations(ctx, st, "node/ipamkill-")
		if len(allocs) != len(live) {
			return fmt.Errorf("%d allocations for %d Nodes", len(allocs), len(live))
		}

		return testenv.Every(live, func(name string) error {
			a := allocs[ipam.NodeAllocationID(name, ipam.FamilyIPv4)]
			if a.GetState() != ipam.StateAllocated || a.GetAddress() != after[name][0] {
				return fmt.Errorf("allocation %s %s, pod CIDR %s", a.GetState(), a.GetAddress(), after[name][0])
			}

			return nil
		})
	})

	pool := ipPool(t.Context(), st, "pod/ipv4")
	require.NotNil(t, pool)
	assert.Equal(t, uint64(len(live)), pool.GetUsed())
}

// openStateDB opens the decisions a stopped talos-ccm persisted.
func openStateDB(t *testing.T, path string) (state.State, func()) {
	t.Helper()

	pool, err := sqlitexx.NewPool("file:"+path, sqlitexx.PoolOptions{LowWatermark: 1, HighWatermark: 2})
	require.NoError(t, err)

	db, err := sqlite.NewState(t.Context(), pool, store.ProtobufMarshaler{}, sqlite.WithLogger(zaptest.NewLogger(t)))
	require.NoError(t, err)

	return state.WrapCore(db), func() {
		db.Close()
		pool.Close() //nolint:errcheck
	}
}

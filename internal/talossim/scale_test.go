package talossim_test

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/siderolabs/talos/pkg/machinery/client"
	talosruntime "github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

func TestFiveThousandMachines(t *testing.T) {
	t.Parallel()

	machines := talossim.Generate(5000, 3)
	_, srv := talossim.StartTest(t, machines)
	c := newClient(t, srv)

	last := machines[len(machines)-1]

	ms, err := safe.StateGet[*talosruntime.MachineStatus](client.WithNode(testContext(t), last.NodeIPs[0].String()), c.COSI,
		talosruntime.NewMachineStatus().Metadata())
	require.NoError(t, err)
	assert.True(t, ms.TypedSpec().Status.Ready)

	pm, err := c.COSI.Get(client.WithNode(testContext(t), last.Name), platformMetadataPtr())
	if last.NoPlatformMetadata {
		require.Error(t, err)
	} else {
		require.NoError(t, err)
		assert.Equal(t, last.ProviderID, pm.(*talosruntime.PlatformMetadata).TypedSpec().ProviderID) //nolint:forcetypeassert
	}
}

// BenchmarkReadFleet reads the PlatformMetadata and addresses of every machine of a 5,000-machine
// fleet through the machinery client, as a CCM does at start, and reports the heap the fleet holds
// once every machine's state is built.
func BenchmarkReadFleet(b *testing.B) {
	const count = 5000

	machines := talossim.Generate(count, 3)

	fleet, err := talossim.NewFleet(machines)
	require.NoError(b, err)

	heapBefore := heapInUse()

	srv, err := talossim.StartServer(fleet, talossim.ServerConfig{
		Listen: "127.0.0.1:0", TalosconfigPath: b.TempDir() + "/talosconfig",
	}, zap.NewNop())
	require.NoError(b, err)

	b.Cleanup(srv.Stop)

	c, err := client.New(b.Context(), client.WithConfigFromFile(srv.TalosconfigPath()))
	require.NoError(b, err)

	b.Cleanup(func() { c.Close() }) //nolint:errcheck

	for b.Loop() {
		start := time.Now()

		var (
			next atomic.Int64
			wg   sync.WaitGroup
		)

		for range 64 {
			wg.Go(func() {
				for i := next.Add(1) - 1; i < count; i = next.Add(1) - 1 {
					ctx := client.WithNode(b.Context(), machines[i].NodeIPs[0].String())

					if _, err := c.COSI.Get(ctx, platformMetadataPtr()); err != nil && !machines[i].NoPlatformMetadata {
						b.Error(err)
					}

					if _, err := safe.StateListAll[*talosruntime.MachineStatus](ctx, c.COSI); err != nil {
						b.Error(err)
					}
				}
			})
		}

		wg.Wait()
		b.ReportMetric(float64(2*count)/time.Since(start).Seconds(), "req/s")
	}

	b.ReportMetric(float64(heapInUse()-heapBefore)/count, "heap-B/machine")
}

func heapInUse() uint64 {
	runtime.GC()

	var ms runtime.MemStats

	runtime.ReadMemStats(&ms)

	return ms.HeapInuse
}

package talos

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	talosruntime "github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// countingState counts the reads of PlatformMetadata, and refuses its watch when refuseWatch is set (as a
// Talos API that serves no watch of that kind does).
type countingState struct {
	state.State

	platformReads atomic.Int32
	refuseWatch   bool
}

func (s *countingState) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) {
	if ptr.Type() == talosruntime.PlatformMetadataType {
		s.platformReads.Add(1)
	}

	return s.State.Get(ctx, ptr, opts...)
}

func (s *countingState) Watch(ctx context.Context, ptr resource.Pointer, ch chan<- state.Event, opts ...state.WatchOption) error {
	if s.refuseWatch && ptr.Type() == talosruntime.PlatformMetadataType {
		return errors.New("watch not supported")
	}

	return s.State.Watch(ctx, ptr, ch, opts...)
}

// TestSessionRefreshOnlyWithoutWatch checks that a machine whose PlatformMetadata watch works is not read
// again on a timer (an idle machine costs no Talos call), and that one whose watch is refused is.
func TestSessionRefreshOnlyWithoutWatch(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name        string
		refuseWatch bool
		wantRereads bool
	}{
		{name: "watch works: no periodic reads", refuseWatch: false, wantRereads: false},
		{name: "watch refused: periodic reads", refuseWatch: true, wantRereads: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			machine := talossim.Machine{
				Name: "m1", Platform: "metal",
				Addresses: []talossim.Address{{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.0.0.5/24")}},
			}

			mem := state.WrapCore(namespaced.NewState(inmem.Build))
			for _, r := range machine.Resources() {
				require.NoError(t, mem.Create(t.Context(), r))
			}

			st := &countingState{State: mem, refuseWatch: tc.refuseWatch}
			updates := make(chan machineFacts, 64)

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()

			spec := machineSessionSpec{
				probe:      newProbeWish(false),
				cosi:       st,
				machineRef: machineRef{node: "m1", ip: "10.0.0.5"},
				opts: sessionOptions{
					CallTimeout:     5 * time.Second,
					RetryMin:        time.Second,
					RetryMax:        time.Second,
					PlatformRefresh: 20 * time.Millisecond,
					ProbeInterval:   time.Hour,
				},
			}

			done := make(chan error)

			go func() {
				done <- spec.RunTask(ctx, nil, workerInput[machineFacts]{facts: updates, logger: zaptest.NewLogger(t)})
			}()

			// The first read, then ten refresh periods.
			require.Eventually(t, func() bool { return st.platformReads.Load() >= 1 }, 5*time.Second, 5*time.Millisecond)
			time.Sleep(200 * time.Millisecond)

			reads := st.platformReads.Load()
			if tc.wantRereads {
				assert.Greater(t, reads, int32(2), "PlatformMetadata read again on a timer")
			} else {
				assert.Equal(t, int32(1), reads, "PlatformMetadata read once, then watched")
			}

			cancel()
			require.NoError(t, <-done)
		})
	}
}

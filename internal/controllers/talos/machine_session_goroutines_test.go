package talos

import (
	"bytes"
	"context"
	"fmt"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// TestSessionGoroutinesPerMachine checks what an idle session costs in goroutines over the stream client
// talos-ccm connects with: none, parked until its watch's next message (over gRPC's, one of its own and one
// of gRPC's per stream), beside the goroutine that reads the connection. Only the sessions' goroutines are
// counted (those that inherit their label: the connection's reader is started by the first session, and
// starts the goroutines of the messages that come), not the in-process server's.
func TestSessionGoroutinesPerMachine(t *testing.T) {
	t.Parallel()

	synctest.Test(t, func(t *testing.T) {
		const machines = 40

		api := newTalosAPI(serveTalosStreams(t, newCountingState(t, sessionMachine("metal", ""))))
		facts := make(chan machineFacts, 4*machines)
		ctx, cancel := context.WithCancel(t.Context())

		var workers []*runningWorker[machineFacts, *machineSessionSpec]

		t.Cleanup(func() {
			cancel()

			for _, w := range workers {
				w.wait()
			}
		})

		pprof.Do(ctx, pprof.Labels(sessionsLabel, t.Name()), func(ctx context.Context) {
			for i := range machines {
				spec := machineSessionSpec{
					condition:  newNodeCondition(false, false),
					api:        api,
					machineRef: machineRef{node: "m1", ip: fmt.Sprintf("10.0.1.%d", i)},
					opts:       sessionOptions{CallTimeout: 5 * time.Second, RetryMin: time.Second, RetryMax: time.Second, PlatformRefresh: time.Hour, ProbeInterval: time.Hour},
				}

				workers = append(workers, startWorker(ctx, &spec, workerInput[machineFacts]{facts: facts, logger: zaptest.NewLogger(t)}))
			}
		})

		connected := map[string]bool{}
		timeout := time.After(10 * time.Second)

		for len(connected) < machines {
			select {
			case f := <-facts:
				if f.addresses != nil {
					connected[f.ip] = true
				}
			case <-timeout:
				t.Fatalf("%d of %d sessions connected within 10s", len(connected), machines)
			}
		}

		// Settled (every goroutine of the bubble blocked: a session's first work, looking at its Node's
		// condition once, has ended): the connection's reader only.
		synctest.Wait()
		require.LessOrEqual(t, labeledGoroutines(t, t.Name()), 1, "goroutines of %d idle sessions besides the connection's reader", machines)
		t.Logf("%d idle sessions: %d goroutines", machines, labeledGoroutines(t, t.Name()))
	})
}

// sessionsLabel is the profiler label of the goroutines a test counts.
const sessionsLabel = "talos_sessions"

// labeledGoroutines counts the goroutines labelled sessionsLabel=value.
func labeledGoroutines(t testing.TB, value string) int {
	t.Helper()

	var profile bytes.Buffer

	require.NoError(t, pprof.Lookup("goroutine").WriteTo(&profile, 1))

	label := fmt.Sprintf("%q:%q", sessionsLabel, value)
	total, group := 0, 0

	// Each group of identical goroutines starts with "N @ pc...", followed by its labels, if any.
	for line := range strings.Lines(profile.String()) {
		if n, _, ok := strings.Cut(line, " @ "); ok {
			group, _ = strconv.Atoi(n)

			continue
		}

		if strings.HasPrefix(line, "# labels: ") && strings.Contains(line, label) {
			total += group
		}
	}

	return total
}

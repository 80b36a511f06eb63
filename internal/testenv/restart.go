package testenv

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"
)

// StartRestartable starts a control plane for one test, as Start does, whose apiserver RestartAPIServer can
// stop and start again: on the same address, with the same certificates (kept in a directory of the
// test's) and, etcd running on, the same data. Clients configured before a restart work after it.
func StartRestartable(t testing.TB) *Env {
	t.Helper()

	return startForTest(t, t.TempDir())
}

// FreeAddress returns a local TCP address nothing listens on, for a server of the test.
func FreeAddress(t testing.TB) string {
	t.Helper()

	lis, err := (&net.ListenConfig{}).Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("failed to find a free address: %v", err)
	}

	addr := lis.Addr().String()

	if err = lis.Close(); err != nil {
		t.Fatalf("failed to find a free address: %v", err)
	}

	return addr
}

// RestartAPIServer stops the apiserver of a control plane of StartRestartable, keeps it down for down once
// it has stopped, and starts it again; it returns when the apiserver serves again, with the times it started
// stopping and was back. It must be called from the test's goroutine.
func (e *Env) RestartAPIServer(t testing.TB, down time.Duration) (stopping, started time.Time) {
	t.Helper()

	apiServer := e.env.ControlPlane.GetAPIServer()
	address := apiServer.ListenAddr

	// A graceful stop waits for requests in flight, and the clients keep many open: after a few seconds it
	// ends with SIGKILL, as an apiserver crash or a node failure would.
	apiServer.StopTimeout = 3 * time.Second
	stopping = time.Now()

	if err := apiServer.Stop(); err != nil {
		t.Logf("the apiserver did not stop gracefully (%v): killed", err)
	}

	// The killed process may hold its port for a moment.
	portClosed := func(ctx context.Context) error {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", address.HostPort())
		if err != nil {
			// Refused, unless the wait itself ended: nothing listens any more.
			return ctx.Err()
		}

		conn.Close() //nolint:errcheck

		return fmt.Errorf("%s accepts connections", address.HostPort())
	}

	Eventually(t, 30*time.Second, 100*time.Millisecond, "the apiserver's port is free", portClosed)

	// The outage is the fault under test: it lasts down, and nothing serves on the apiserver's port meanwhile.
	Consistently(t, down, 100*time.Millisecond, "the apiserver stays down", portClosed)

	if err := apiServer.Start(); err != nil {
		t.Fatalf("failed to start the apiserver again: %v", err)
	}

	started = time.Now()

	if apiServer.ListenAddr != address {
		t.Fatalf("the apiserver came back on %v instead of %v", apiServer.ListenAddr, address)
	}

	return stopping, started
}

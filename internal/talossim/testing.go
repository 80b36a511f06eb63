package talossim

import (
	"os"
	"path/filepath"
	"testing"

	"go.uber.org/zap/zaptest"
)

// StartTest serves machines on a TLS endpoint on 127.0.0.1 (talosconfig written in a temporary
// directory) and on a unix socket, both stopped when the test ends.
func StartTest(t testing.TB, machines []Machine) (*Fleet, *Server) {
	t.Helper()

	fleet, err := NewFleet(machines)
	if err != nil {
		t.Fatalf("failed to build fleet: %v", err)
	}

	// Unix socket paths are limited to about 100 bytes, test temporary directories can be longer.
	sockDir, err := os.MkdirTemp("", "talossim")
	if err != nil {
		t.Fatalf("failed to create socket directory: %v", err)
	}

	t.Cleanup(func() { os.RemoveAll(sockDir) }) //nolint:errcheck

	srv, err := StartServer(fleet, ServerConfig{
		Listen:          "127.0.0.1:0",
		Unix:            filepath.Join(sockDir, "apid.sock"),
		TalosconfigPath: filepath.Join(t.TempDir(), "talosconfig"),
	}, zaptest.NewLogger(t))
	if err != nil {
		t.Fatalf("failed to start talos-sim: %v", err)
	}

	t.Cleanup(srv.Stop)

	return fleet, srv
}

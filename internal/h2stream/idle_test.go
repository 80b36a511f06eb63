package h2stream

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
)

// serverProcessEnv runs the test binary as the server of TestIdleStreamsCost.
const serverProcessEnv = "H2STREAM_TEST_SERVER"

// TestIdleStreamsCost opens streams that stay idle, against a server in another process (its own heap and
// goroutines are not counted): they add no goroutine, and less than a kilobyte of heap each. grpc-go's
// client streams cost a goroutine and about 4 KB each.
func TestIdleStreamsCost(t *testing.T) {
	if os.Getenv(serverProcessEnv) != "" {
		serveForever(t)

		return
	}

	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestIdleStreamsCost$")
	cmd.Env = append(os.Environ(), serverProcessEnv+"=1")
	cmd.Stderr = os.Stderr

	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)

	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	})

	addr, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)

	c := newTestClient(t, Options{}, addr[:len(addr)-1])
	ctx, cancel := context.WithCancel(t.Context())

	defer cancel()

	// The first stream connects, and starts the connection's reader.
	open := func() grpc.ClientStream {
		s, err := call(ctx, c, sendMethod, "block=1")
		require.NoError(t, err)

		_, err = recv(s)
		require.NoError(t, err)

		return s
	}

	streams := []grpc.ClientStream{open()}

	var before, after runtimeStats

	before.read()

	const idle = 500

	for range idle {
		streams = append(streams, open())
	}

	after.read()

	perStream := (float64(after.heap) - float64(before.heap)) / idle
	t.Logf("%d idle streams: %d goroutines more, %.0f bytes of heap each", idle, after.goroutines-before.goroutines, perStream)
	assert.LessOrEqual(t, after.goroutines-before.goroutines, 0, "goroutines of %d idle streams", idle)
	assert.Less(t, perStream, 1024.0, "heap of an idle stream")
	require.Len(t, streams, idle+1)
}

// serveForever serves the test service on the loopback, writes its address, and stops when its standard
// input closes.
func serveForever(t *testing.T) {
	srv := startServer(t, "", nil)

	_, _ = os.Stdout.WriteString(srv.addr + "\n")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

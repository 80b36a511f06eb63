package api_test

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/api"
	"github.com/talos-ccm/talos-ccm/internal/resources"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// newState is an in-memory state with talos-ccm's definitions and one NodeTransform.
func newState(t *testing.T) state.State {
	t.Helper()

	st := state.WrapCore(namespaced.NewState(inmem.Build))
	require.NoError(t, resources.Register(t.Context(), st))

	nt := node.NewNodeTransform(node.NamespaceName, "worker-1")
	nt.TypedSpec().Value = &specs.NodeTransformSpec{ProviderId: "talos://metal/10.0.0.1", Platform: "metal"}
	require.NoError(t, st.Create(t.Context(), nt))

	return st
}

// shortTempDir is a temporary directory with a path short enough for unix sockets.
func shortTempDir(t *testing.T) string {
	t.Helper()

	dir, err := os.MkdirTemp("", "api")
	require.NoError(t, err)

	t.Cleanup(func() { os.RemoveAll(dir) }) //nolint:errcheck

	return dir
}

func startServer(t *testing.T, st state.CoreState, opts api.Options) *api.Server {
	t.Helper()

	srv, err := api.Start(t.Context(), st, opts, zaptest.NewLogger(t))
	require.NoError(t, err)

	t.Cleanup(srv.Stop)

	return srv
}

func connect(t *testing.T, endpoint api.Endpoint, opts api.ClientOptions) state.State {
	t.Helper()

	conn, err := api.Dial(endpoint, opts)
	require.NoError(t, err)

	t.Cleanup(func() { conn.Close() }) //nolint:errcheck

	return api.NewClientState(conn)
}

func TestUnixSocketServesReadOnly(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	st := newState(t)
	socket := filepath.Join(shortTempDir(t), "sub", "ccm.sock")
	srv := startServer(t, st, api.Options{Listen: socket})

	fi, err := os.Stat(socket)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "socket mode")

	dir, err := os.Stat(filepath.Dir(socket))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dir.Mode().Perm(), "socket directory mode")

	conn, err := api.Dial(srv.Endpoint(), api.ClientOptions{})
	require.NoError(t, err)

	defer conn.Close() //nolint:errcheck

	client := api.NewClientState(conn)
	ctx := t.Context()

	// Reads work, and the resources decode to their typed Go values.
	nt, err := safe.StateGetByID[*node.NodeTransform](ctx, client, "worker-1")
	require.NoError(t, err)
	assert.Equal(t, "talos://metal/10.0.0.1", nt.TypedSpec().Value.GetProviderId())

	rds, err := safe.StateListAll[*meta.ResourceDefinition](ctx, client)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, rds.Len(), len(resources.All()))

	watchCtx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()

	events := make(chan state.Event)
	require.NoError(t, client.WatchKind(watchCtx, node.NewNodeTransform(node.NamespaceName, "").Metadata(), events, state.WithBootstrapContents(true)))

	select {
	case ev := <-events:
		assert.Equal(t, state.Created, ev.Type)
		assert.Equal(t, "worker-1", ev.Resource.Metadata().ID())
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event")
	}

	// Every write is refused, whichever way a client makes it.
	raw := v1alpha1.NewStateClient(conn)

	marshaled := marshal(t, nt)
	denied := func(what string, err error) {
		t.Helper()

		require.Error(t, err, what)
		assert.Equal(t, codes.PermissionDenied, status.Code(err), "%s: %v", what, err)
		assert.Contains(t, err.Error(), "read-only", what)
	}

	md := nt.Metadata()

	_, err = raw.Create(ctx, &v1alpha1.CreateRequest{Resource: marshaled, Options: &v1alpha1.CreateOptions{}})
	denied("create", err)

	_, err = raw.Update(ctx, &v1alpha1.UpdateRequest{NewResource: marshaled, Options: &v1alpha1.UpdateOptions{}})
	denied("update", err)

	_, err = raw.Destroy(ctx, &v1alpha1.DestroyRequest{Namespace: md.Namespace(), Type: md.Type(), Id: md.ID(), Options: &v1alpha1.DestroyOptions{}})
	denied("destroy", err)

	_, err = raw.Teardown(ctx, &v1alpha1.TeardownRequest{Namespace: md.Namespace(), Type: md.Type(), Id: md.ID(), Options: &v1alpha1.TeardownOptions{}})
	denied("teardown", err)

	_, err = raw.TeardownAndDestroy(ctx, &v1alpha1.TeardownAndDestroyRequest{Namespace: md.Namespace(), Type: md.Type(), Id: md.ID(), Options: &v1alpha1.TeardownAndDestroyOptions{}})
	denied("teardown and destroy", err)

	// Through the COSI client, a finalizer is added with an update.
	err = client.AddFinalizer(ctx, md, "evil")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read-only")

	err = client.Destroy(ctx, md)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "read-only")

	// Nothing changed.
	after, err := safe.StateGetByID[*node.NodeTransform](ctx, st, "worker-1")
	require.NoError(t, err)
	assert.Equal(t, nt.Metadata().Version(), after.Metadata().Version())
	assert.True(t, after.Metadata().Finalizers().Empty())

	cancelWatch()
	conn.Close() //nolint:errcheck
	srv.Stop()

	_, err = os.Stat(socket)
	assert.ErrorIs(t, err, os.ErrNotExist, "the socket is removed on stop")
}

func marshal(t *testing.T, r resource.Resource) *v1alpha1.Resource {
	t.Helper()

	p, err := protobuf.FromResource(r)
	require.NoError(t, err)

	m, err := p.Marshal()
	require.NoError(t, err)

	return m
}

func TestUnixSocketStaleAndLive(t *testing.T) {
	t.Parallel()

	st := newState(t)
	dir := shortTempDir(t)
	socket := filepath.Join(dir, "ccm.sock")

	// A socket left by a process that is gone is replaced.
	stale, err := net.Listen("unix", socket)
	require.NoError(t, err)

	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	require.NoError(t, stale.Close())

	srv := startServer(t, st, api.Options{Listen: socket})

	// A socket that someone serves is not taken over.
	_, err = api.Start(t.Context(), st, api.Options{Listen: socket}, zaptest.NewLogger(t))
	require.ErrorContains(t, err, "another process serves it")

	srv.Stop()

	// A file that is not a socket is left alone.
	plain := filepath.Join(dir, "plain")
	require.NoError(t, os.WriteFile(plain, nil, 0o600))

	_, err = api.Start(t.Context(), st, api.Options{Listen: plain}, zaptest.NewLogger(t))
	require.ErrorContains(t, err, "not a socket")
}

func TestStopsWithContext(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	socket := filepath.Join(shortTempDir(t), "ccm.sock")
	ctx, cancel := context.WithCancel(t.Context())

	_, err := api.Start(ctx, newState(t), api.Options{Listen: socket}, zaptest.NewLogger(t))
	require.NoError(t, err)

	cancel()

	// The server stops on a goroutine of its own, over a real socket (no synctest bubble may hold one), and
	// tells no caller when: a poll of the socket's removal is the only wait.
	require.Eventually(t, func() bool {
		_, statErr := os.Stat(socket)

		return os.IsNotExist(statErr)
	}, 10*time.Second, 10*time.Millisecond)
}

func TestTCPRequiresMutualTLS(t *testing.T) {
	t.Parallel()

	st := newState(t)
	dir := t.TempDir()

	_, err := api.Start(t.Context(), st, api.Options{Listen: "tcp://127.0.0.1:0"}, zaptest.NewLogger(t))
	require.ErrorContains(t, err, "requires --api-tls-cert, --api-tls-key and --api-client-ca")

	pki, err := talossim.NewPKI()
	require.NoError(t, err)

	other, err := talossim.NewPKI()
	require.NoError(t, err)

	files := map[string][]byte{
		"ca.crt": pki.CAPEM, "server.crt": pki.ServerCertPEM, "server.key": pki.ServerKeyPEM,
		"client.crt": pki.ClientCertPEM, "client.key": pki.ClientKeyPEM,
		"other.crt": other.ClientCertPEM, "other.key": other.ClientKeyPEM,
	}

	for name, data := range files {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), data, 0o600))
	}

	path := func(name string) string { return filepath.Join(dir, name) }

	srv := startServer(t, st, api.Options{
		Listen:   "tcp://127.0.0.1:0",
		TLSCert:  path("server.crt"),
		TLSKey:   path("server.key"),
		ClientCA: path("ca.crt"),
	})

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()

	for _, tc := range []struct {
		name    string
		opts    api.ClientOptions
		refused bool
	}{
		{name: "client certificate from the CA", opts: api.ClientOptions{CA: path("ca.crt"), Cert: path("client.crt"), Key: path("client.key")}},
		{name: "no client certificate", opts: api.ClientOptions{CA: path("ca.crt")}, refused: true},
		{name: "client certificate from another CA", opts: api.ClientOptions{CA: path("ca.crt"), Cert: path("other.crt"), Key: path("other.key")}, refused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := connect(t, srv.Endpoint(), tc.opts)

			_, err := safe.StateGetByID[*node.NodeTransform](ctx, client, "worker-1")
			if !tc.refused {
				require.NoError(t, err)

				return
			}

			require.Error(t, err)
			// The handshake fails, or the server closes the connection right after it (TLS 1.3 verifies
			// the client after the handshake): either way the client sees the server as unavailable.
			assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
		})
	}
}

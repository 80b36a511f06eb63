package talossim_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/netip"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/talos/pkg/machinery/client"
	"github.com/siderolabs/talos/pkg/machinery/resources/hardware"
	"github.com/siderolabs/talos/pkg/machinery/resources/k8s"
	"github.com/siderolabs/talos/pkg/machinery/resources/network"
	"github.com/siderolabs/talos/pkg/machinery/resources/runtime"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// testMachines returns two cloud machines (one dual stack, one control plane) and one metal
// machine without platform metadata.
func testMachines() []talossim.Machine {
	return []talossim.Machine{
		{
			Name: "aws-0000", ControlPlane: true, Platform: "aws", Region: "us-east-1", Zone: "us-east-1a",
			InstanceType: "m5.large", InstanceID: "i-0123456789abcdef0", ProviderID: "aws:///us-east-1a/i-0123456789abcdef0",
			Addresses: []talossim.Address{
				{LinkName: "lo", Prefix: netip.MustParsePrefix("127.0.0.1/8"), Scope: "host"},
				{LinkName: "ens5", Prefix: netip.MustParsePrefix("10.0.0.10/20")},
				{LinkName: "ens5", Prefix: netip.MustParsePrefix("2001:db8:0:1::10/64")},
			},
			NodeIPs: []netip.Addr{netip.MustParseAddr("10.0.0.10"), netip.MustParseAddr("2001:db8:0:1::10")},
			System:  talossim.SystemInfo{Manufacturer: "Amazon EC2", UUID: "ec2a0000-0000-4000-a000-000000000000"},
		},
		{
			Name: "gcp-0001", Domain: "example.net", Platform: "gcp", Region: "us-central1", Zone: "us-central1-a",
			InstanceType: "e2-standard-4", ProviderID: "gce://sim/us-central1-a/gcp-0001", Spot: true,
			Addresses: []talossim.Address{{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.16.0.11/32")}},
			NodeIPs:   []netip.Addr{netip.MustParseAddr("10.16.0.11")},
			Stage:     "booting",
		},
		{
			Name: "metal-0002", Platform: "metal", NoPlatformMetadata: true,
			Addresses: []talossim.Address{{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.96.0.12/24")}},
			NodeIPs:   []netip.Addr{netip.MustParseAddr("10.96.0.12")},
		},
	}
}

func newClient(t *testing.T, srv *talossim.Server) *client.Client {
	t.Helper()

	c, err := client.New(t.Context(), client.WithConfigFromFile(srv.TalosconfigPath()))
	require.NoError(t, err)

	t.Cleanup(func() { require.NoError(t, c.Close()) })

	return c
}

func testContext(t *testing.T) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)

	return ctx
}

func platformMetadataPtr() resource.Pointer {
	return resource.NewMetadata(runtime.NamespaceName, runtime.PlatformMetadataType, runtime.PlatformMetadataID, resource.VersionUndefined)
}

func TestGetRoutesPerMachine(t *testing.T) {
	t.Parallel()

	_, srv := talossim.StartTest(t, testMachines())
	c := newClient(t, srv)
	ctx := testContext(t)

	for _, tc := range []struct {
		node       string
		providerID string
		hostname   string
	}{
		{node: "10.0.0.10", providerID: "aws:///us-east-1a/i-0123456789abcdef0", hostname: "aws-0000"},
		{node: "2001:db8:0:1::10", providerID: "aws:///us-east-1a/i-0123456789abcdef0", hostname: "aws-0000"},
		{node: "gcp-0001", providerID: "gce://sim/us-central1-a/gcp-0001", hostname: "gcp-0001.example.net"},
		{node: "gcp-0001.example.net", providerID: "gce://sim/us-central1-a/gcp-0001", hostname: "gcp-0001.example.net"},
		{node: "10.16.0.11", providerID: "gce://sim/us-central1-a/gcp-0001", hostname: "gcp-0001.example.net"},
	} {
		pm, err := safe.StateGet[*runtime.PlatformMetadata](client.WithNode(ctx, tc.node), c.COSI, platformMetadataPtr())
		require.NoError(t, err, tc.node)
		assert.Equal(t, tc.providerID, pm.TypedSpec().ProviderID, tc.node)
		assert.Equal(t, tc.hostname, pm.TypedSpec().Hostname, tc.node)
	}

	// Metal without platform metadata: the resource is absent, the machine is there.
	_, err := c.COSI.Get(client.WithNode(ctx, "10.96.0.12"), platformMetadataPtr())
	require.True(t, state.IsNotFoundError(err), "%v", err)

	ms, err := safe.StateGet[*runtime.MachineStatus](client.WithNode(ctx, "10.96.0.12"),
		c.COSI, runtime.NewMachineStatus().Metadata())
	require.NoError(t, err)
	assert.Equal(t, runtime.MachineStageRunning, ms.TypedSpec().Stage)
	assert.True(t, ms.TypedSpec().Status.Ready)

	ms, err = safe.StateGet[*runtime.MachineStatus](client.WithNode(ctx, "gcp-0001"), c.COSI, runtime.NewMachineStatus().Metadata())
	require.NoError(t, err)
	assert.Equal(t, runtime.MachineStageBooting, ms.TypedSpec().Stage)
	assert.False(t, ms.TypedSpec().Status.Ready)

	si, err := safe.StateGet[*hardware.SystemInformation](client.WithNode(ctx, "aws-0000"), c.COSI,
		hardware.NewSystemInformation(hardware.SystemInformationID).Metadata())
	require.NoError(t, err)
	assert.Equal(t, "ec2a0000-0000-4000-a000-000000000000", si.TypedSpec().UUID)

	cm, err := safe.StateGet[*k8s.ControllerManagerConfig](client.WithNode(ctx, "aws-0000"), c.COSI, k8s.NewControllerManagerConfig().Metadata())
	require.NoError(t, err)
	assert.Equal(t, []string{talossim.PodCIDRv4, talossim.PodCIDRv6}, cm.TypedSpec().PodCIDRs)

	addrs, err := safe.StateListAll[*network.AddressStatus](client.WithNode(ctx, "aws-0000"), c.COSI)
	require.NoError(t, err)
	require.Equal(t, 3, addrs.Len())

	v6, ok := addrs.Find(func(a *network.AddressStatus) bool { return a.Metadata().ID() == "ens5/2001:db8:0:1::10/64" })
	require.True(t, ok)
	assert.Equal(t, "ens5", v6.TypedSpec().LinkName)
	assert.Equal(t, netip.MustParsePrefix("2001:db8:0:1::10/64"), v6.TypedSpec().Address)
}

func TestRefusals(t *testing.T) {
	t.Parallel()

	fleet, srv := talossim.StartTest(t, testMachines())
	c := newClient(t, srv)
	ctx := testContext(t)

	require.NoError(t, fleet.SetUnreachable("gcp-0001", true))

	t.Run("write", func(t *testing.T) {
		pm := runtime.NewPlatformMetadataSpec(runtime.NamespaceName, runtime.PlatformMetadataID)
		err := c.COSI.Create(client.WithNode(ctx, "aws-0000"), pm)
		require.Error(t, err)
		// The COSI client turns PermissionDenied into an owner conflict, keeping the gRPC message.
		assert.True(t, state.IsOwnerConflictError(err), "%v", err)
		assert.Contains(t, err.Error(), "PermissionDenied")

		err = c.COSI.Destroy(client.WithNode(ctx, "aws-0000"), platformMetadataPtr())
		assert.True(t, state.IsOwnerConflictError(err), "%v", err)

		// The resource is still there.
		_, err = c.COSI.Get(client.WithNode(ctx, "aws-0000"), platformMetadataPtr())
		require.NoError(t, err)
	})

	t.Run("unknown node", func(t *testing.T) {
		_, err := c.COSI.Get(client.WithNode(ctx, "10.9.9.9"), platformMetadataPtr())
		require.Error(t, err)
		assert.True(t, state.IsNotFoundError(err), "%v", err)
		assert.Contains(t, err.Error(), "unknown node")
	})

	t.Run("unreachable", func(t *testing.T) {
		_, err := c.COSI.Get(client.WithNode(ctx, "gcp-0001"), platformMetadataPtr())
		assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

		_, err = c.COSI.List(client.WithNode(ctx, "gcp-0001"), network.NewAddressStatus(network.NamespaceName, "").Metadata())
		assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

		err = c.COSI.WatchKind(client.WithNode(ctx, "gcp-0001"), network.NewAddressStatus(network.NamespaceName, "").Metadata(), make(chan state.Event))
		assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	})

	t.Run("nodes", func(t *testing.T) {
		_, err := c.COSI.Get(client.WithNodes(ctx, "aws-0000"), platformMetadataPtr())
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	})

	t.Run("no node", func(t *testing.T) {
		_, err := c.COSI.Get(ctx, platformMetadataPtr())
		assert.Equal(t, codes.InvalidArgument, status.Code(err), "%v", err)
	})
}

func TestWatchSeesAddressChanges(t *testing.T) {
	t.Parallel()

	fleet, srv := talossim.StartTest(t, testMachines())
	c := newClient(t, srv)
	ctx := client.WithNode(testContext(t), "10.16.0.11")

	kindCh := make(chan state.Event)
	require.NoError(t, c.COSI.WatchKind(ctx, network.NewAddressStatus(network.NamespaceName, "").Metadata(), kindCh,
		state.WithBootstrapContents(true)))

	idCh := make(chan state.Event)
	require.NoError(t, c.COSI.Watch(ctx, network.NewAddressStatus(network.NamespaceName, "eth0/10.16.0.11/32").Metadata(), idCh))

	next := func(ch <-chan state.Event) state.Event {
		t.Helper()

		select {
		case ev := <-ch:
			require.NotEqual(t, state.Errored, ev.Type, "%v", ev.Error)

			return ev
		case <-ctx.Done():
			t.Fatal("timeout waiting for a watch event")
		}

		return state.Event{}
	}

	ev := next(kindCh)
	require.Equal(t, state.Created, ev.Type)
	require.Equal(t, "eth0/10.16.0.11/32", ev.Resource.Metadata().ID())
	require.Equal(t, state.Bootstrapped, next(kindCh).Type)

	ev = next(idCh)
	require.Equal(t, state.Created, ev.Type)

	require.NoError(t, fleet.SetAddresses("gcp-0001", []talossim.Address{
		{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.16.0.12/32")},
	}))

	seen := map[state.EventType]string{}
	for range 2 {
		ev = next(kindCh)
		seen[ev.Type] = ev.Resource.Metadata().ID()
	}

	assert.Equal(t, map[state.EventType]string{state.Destroyed: "eth0/10.16.0.11/32", state.Created: "eth0/10.16.0.12/32"}, seen)

	ev = next(idCh)
	require.Equal(t, state.Destroyed, ev.Type)

	// An unreachable machine breaks its open watches with Unavailable; the COSI client retries them
	// from the last bookmark, so the watch resumes when the machine is back and sees what changed.
	require.NoError(t, fleet.SetUnreachable("gcp-0001", true))
	require.NoError(t, fleet.SetAddresses("gcp-0001", []talossim.Address{
		{LinkName: "eth0", Prefix: netip.MustParsePrefix("10.16.0.13/32")},
	}))
	require.NoError(t, fleet.SetUnreachable("gcp-0001", false))

	seen = map[state.EventType]string{}
	for range 2 {
		ev = next(kindCh)
		seen[ev.Type] = ev.Resource.Metadata().ID()
	}

	assert.Equal(t, map[state.EventType]string{state.Destroyed: "eth0/10.16.0.12/32", state.Created: "eth0/10.16.0.13/32"}, seen)
}

func TestLatencyAndRemovedResources(t *testing.T) {
	t.Parallel()

	fleet, srv := talossim.StartTest(t, testMachines())
	c := newClient(t, srv)
	ctx := client.WithNode(testContext(t), "aws-0000")

	require.NoError(t, fleet.SetLatency("aws-0000", 150*time.Millisecond))

	start := time.Now()
	_, err := c.COSI.Get(ctx, platformMetadataPtr())
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)

	require.NoError(t, fleet.SetLatency("aws-0000", 0))

	for _, kind := range []talossim.Kind{talossim.KindPlatformMetadata, talossim.KindAddresses} {
		require.NoError(t, fleet.RemoveResource("aws-0000", kind))
	}

	_, err = c.COSI.Get(ctx, platformMetadataPtr())
	assert.True(t, state.IsNotFoundError(err), "%v", err)

	list, err := c.COSI.List(ctx, network.NewAddressStatus(network.NamespaceName, "").Metadata())
	require.NoError(t, err)
	assert.Empty(t, list.Items)

	faults, err := fleet.Faults("aws-0000")
	require.NoError(t, err)
	assert.Equal(t, []talossim.Kind{talossim.KindPlatformMetadata, talossim.KindAddresses}, faults.Removed)

	require.NoError(t, fleet.RestoreResource("aws-0000", talossim.KindPlatformMetadata))

	_, err = c.COSI.Get(ctx, platformMetadataPtr())
	require.NoError(t, err)

	require.ErrorIs(t, fleet.SetLatency("nope", time.Second), talossim.ErrUnknownMachine)
}

func TestClientCertificateRequired(t *testing.T) {
	t.Parallel()

	_, srv := talossim.StartTest(t, testMachines())

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(srv.PKI().CAPEM))

	// The right CA but no client certificate: the handshake fails.
	c, err := client.New(t.Context(), client.WithEndpoints(srv.Endpoint()), client.WithTLSConfig(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS13}))
	require.NoError(t, err)

	t.Cleanup(func() { c.Close() }) //nolint:errcheck

	_, err = c.COSI.Get(client.WithNode(testContext(t), "aws-0000"), platformMetadataPtr())
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)

	// The same configuration with the client certificate works.
	cert, err := tls.X509KeyPair(srv.PKI().ClientCertPEM, srv.PKI().ClientKeyPEM)
	require.NoError(t, err)

	withCert, err := client.New(t.Context(), client.WithEndpoints(srv.Endpoint()),
		client.WithTLSConfig(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13}))
	require.NoError(t, err)

	t.Cleanup(func() { withCert.Close() }) //nolint:errcheck

	_, err = withCert.COSI.Get(client.WithNode(testContext(t), "aws-0000"), platformMetadataPtr())
	require.NoError(t, err)
}

func TestUnixSocket(t *testing.T) {
	t.Parallel()

	_, srv := talossim.StartTest(t, testMachines())

	// The machinery client sets no transport credentials for unix sockets: the caller must.
	c, err := client.New(t.Context(), client.WithUnixSocket(srv.UnixPath()),
		client.WithGRPCDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials())))
	require.NoError(t, err)

	t.Cleanup(func() { require.NoError(t, c.Close()) })

	pm, err := safe.StateGet[*runtime.PlatformMetadata](client.WithNode(testContext(t), "gcp-0001"), c.COSI, platformMetadataPtr())
	require.NoError(t, err)
	assert.True(t, pm.TypedSpec().Spot)
}

func TestAddRemoveMachine(t *testing.T) {
	t.Parallel()

	fleet, srv := talossim.StartTest(t, testMachines())
	c := newClient(t, srv)
	ctx := testContext(t)

	m := talossim.Generate(1, 7)[0]
	m.Name = "extra-0000"
	m.NodeIPs = []netip.Addr{netip.MustParseAddr("10.200.0.1")}
	require.NoError(t, fleet.AddMachine(m))
	require.Error(t, fleet.AddMachine(m), "duplicate name")

	_, err := c.COSI.Get(client.WithNode(ctx, "10.200.0.1"), runtime.NewMachineStatus().Metadata())
	require.NoError(t, err)

	require.NoError(t, fleet.RemoveMachine("extra-0000"))

	_, err = c.COSI.Get(client.WithNode(ctx, "10.200.0.1"), runtime.NewMachineStatus().Metadata())
	assert.True(t, state.IsNotFoundError(err), "%v", err)

	_, ok := fleet.Machine("extra-0000")
	assert.False(t, ok)
	assert.Len(t, fleet.Machines(), 3)
}

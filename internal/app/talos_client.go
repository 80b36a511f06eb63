package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"

	"github.com/talos-ccm/talos-ccm/internal/h2stream"
)

// inClusterTalosConfig is where Talos mounts API credentials into pods of a namespace allowed by
// kubernetesTalosAPIAccess (through a talos.dev ServiceAccount object).
const inClusterTalosConfig = "/var/run/secrets/talos.dev/config"

// talosConfigPath picks the talosconfig: the flag, then $TALOSCONFIG, then the in-cluster mount.
func talosConfigPath(flag string) (string, error) {
	for _, candidate := range []string{flag, os.Getenv("TALOSCONFIG")} {
		if candidate != "" {
			return candidate, nil
		}
	}

	if _, err := os.Stat(inClusterTalosConfig); err == nil {
		return inClusterTalosConfig, nil
	}

	return "", errors.New("no talosconfig: set --talosconfig or TALOSCONFIG, or run in a namespace with Talos API access")
}

// talosConnectParams bound the reconnect backoff of the Talos API connection.
var talosConnectParams = grpc.ConnectParams{
	Backoff: backoff.Config{
		BaseDelay:  time.Second,
		Multiplier: 1.6,
		Jitter:     0.2,
		MaxDelay:   5 * time.Second,
	},
	MinConnectTimeout: 10 * time.Second,
}

// talosMaxMessage is the largest message the Talos API answers with (machinery's GRPCMaxMessageSize).
const talosMaxMessage = 32 << 20

// talosConn is the connection to the Talos API: gRPC's for the unary calls, and a stream client for the
// watches, which costs no goroutine per stream where gRPC's costs one (see h2stream).
type talosConn struct {
	*grpc.ClientConn

	streams *h2stream.Client
}

// api is the connection the Talos sources call.
func (c *talosConn) api() grpc.ClientConnInterface {
	return h2stream.Split{Unary: c.ClientConn, Streams: c.streams}
}

// Close closes both connections.
func (c *talosConn) Close() error {
	_ = c.streams.Close()

	return c.ClientConn.Close() //nolint:wrapcheck // gRPC's own error.
}

// newTalosConn connects to the Talos API with the talosconfig at path, as the machinery client would, without
// linking it (it brings OpenPGP, CNI and the machine config's packages into the binary, whose pages are in
// every pod's memory): TLS with the context's certificates, its endpoints (endpoints, when set, replace
// them) balanced round-robin, the metadata apid expects. It also returns the talosconfig's context name, the
// default cluster name. The endpoint records why calls fail to reach it.
func newTalosConn(path string, endpoints []string, endpoint *talosEndpoint) (*talosConn, string, error) {
	cfg, err := readTalosConfig(path)
	if err != nil {
		return nil, "", err
	}

	tlsConfig, err := cfg.tlsConfig()
	if err != nil {
		return nil, "", fmt.Errorf("failed to read talosconfig %q: %w", path, err)
	}

	if len(endpoints) == 0 {
		endpoints = cfg.endpoints()
	}

	target, targetOpts, err := talosTarget(endpoints)
	if err != nil {
		return nil, "", fmt.Errorf("failed to read talosconfig %q: %w", path, err)
	}

	callCreds := []credentials.PerRPCCredentials{newTalosCallMetadata(cfg.context.Cluster)}
	if basic := cfg.context.Auth.Basic; basic != nil {
		callCreds = append(callCreds, basicAuth{username: basic.Username, password: basic.Password})
	}

	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(talosMaxMessage)),
		grpc.WithInitialWindowSize(65535 * 32),
		grpc.WithInitialConnWindowSize(65535 * 16),
		// gRPC's default reconnect backoff grows to two minutes: after a Talos API outage, the machines
		// waiting would wait that long again. Reconnecting within seconds costs one dial per attempt.
		grpc.WithConnectParams(talosConnectParams),
	}, targetOpts...)
	opts = append(opts, endpoint.dialOptions()...)

	for _, creds := range callCreds {
		opts = append(opts, grpc.WithPerRPCCredentials(creds))
	}

	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("failed to create Talos API client from %q: %w", path, err)
	}

	streams, err := h2stream.New(h2stream.Options{
		Endpoints:    talosStreamEndpoints(endpoints),
		TLS:          tlsConfig,
		Credentials:  callCreds,
		MaxMessage:   talosMaxMessage,
		UserAgent:    "talos-ccm",
		RetryMin:     talosConnectParams.Backoff.BaseDelay,
		RetryMax:     talosConnectParams.Backoff.MaxDelay,
		DialTimeout:  talosConnectParams.MinConnectTimeout,
		OnConnection: endpoint.connection,
	})
	if err != nil {
		_ = conn.Close()

		return nil, "", fmt.Errorf("failed to create Talos API client from %q: %w", path, err)
	}

	return &talosConn{ClientConn: conn, streams: streams}, cfg.Context, nil
}

// talosStreamEndpoints are the stream client's endpoints: each verified under its own name, as talosTarget's.
func talosStreamEndpoints(endpoints []string) []h2stream.Endpoint {
	out := make([]h2stream.Endpoint, 0, len(endpoints))

	for _, e := range endpoints {
		out = append(out, h2stream.Endpoint{Address: talosEndpointAddress(e)})
	}

	return out
}

// talosMetadata adds to every call the metadata the machinery client adds: see newTalosCallMetadata.
func talosMetadata(cluster string) grpc.DialOption {
	return grpc.WithPerRPCCredentials(newTalosCallMetadata(cluster))
}

// newTalosCallMetadata is the metadata the machinery client adds to every call: the runtime the call is for
// (a proxy in front of several, such as Omni's, routes on it) and the context's cluster, when it names one.
//
// It is the connection's per-call credentials rather than an interceptor's: gRPC asks for it when it writes
// a call's headers and keeps nothing of it, where metadata added to a call's context stays in the context of
// the call for as long as it lasts, and the Talos source holds a watch stream of every machine for as long
// as its Node lasts (about 190 bytes each, thousands of machines).
func newTalosCallMetadata(cluster string) talosCallMetadata {
	md := talosCallMetadata{"runtime": "Talos"}
	if cluster != "" {
		md["context"] = cluster
	}

	return md
}

// talosCallMetadata is the metadata every call to the Talos API carries. gRPC copies what it returns.
type talosCallMetadata map[string]string

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (md talosCallMetadata) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return md, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the metadata routes calls, and is no
// secret.
func (talosCallMetadata) RequireTransportSecurity() bool { return false }

// basicAuth sends a talosconfig's basic credentials with every call.
type basicAuth struct {
	username, password string
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b basicAuth) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"Authorization": "Basic " + base64Text(b.username+":"+b.password)}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: the credentials never travel in the
// clear.
func (basicAuth) RequireTransportSecurity() bool { return true }

var (
	_ credentials.PerRPCCredentials = basicAuth{}
	_ credentials.PerRPCCredentials = talosCallMetadata{}
)

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
	"google.golang.org/grpc/metadata"
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

// newTalosConn connects to the Talos API with the talosconfig at path, as the machinery client would, without
// linking it (it brings OpenPGP, CNI and the machine config's packages into the binary, whose pages are in
// every pod's memory): TLS with the context's certificates, its endpoints (endpoints, when set, replace
// them) balanced round-robin, the metadata apid expects. It also returns the talosconfig's context name, the
// default cluster name. The endpoint records why calls fail to reach it.
func newTalosConn(path string, endpoints []string, endpoint *talosEndpoint) (*grpc.ClientConn, string, error) {
	cfg, err := readTalosConfig(path)
	if err != nil {
		return nil, "", err
	}

	creds, err := cfg.transportCredentials()
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

	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(talosMaxMessage)),
		grpc.WithInitialWindowSize(65535 * 32),
		grpc.WithInitialConnWindowSize(65535 * 16),
		// gRPC's default reconnect backoff grows to two minutes: after a Talos API outage, the machines
		// waiting would wait that long again. Reconnecting within seconds costs one dial per attempt.
		grpc.WithConnectParams(talosConnectParams),
	}, targetOpts...)
	opts = append(opts, talosMetadata(cfg.context.Cluster)...)
	opts = append(opts, endpoint.dialOptions()...)

	if basic := cfg.context.Auth.Basic; basic != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(basicAuth{username: basic.Username, password: basic.Password}))
	}

	conn, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("failed to create Talos API client from %q: %w", path, err)
	}

	return conn, cfg.Context, nil
}

// talosMetadata adds to every call the metadata the machinery client adds: the runtime the call is for
// (a proxy in front of several, such as Omni's, routes on it) and the context's cluster, when it names one.
func talosMetadata(cluster string) []grpc.DialOption {
	kv := []string{"runtime", "Talos"}
	if cluster != "" {
		kv = append(kv, "context", cluster)
	}

	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(metadata.AppendToOutgoingContext(ctx, kv...), method, req, reply, cc, opts...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(metadata.AppendToOutgoingContext(ctx, kv...), desc, cc, method, opts...)
		}),
	}
}

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

var _ credentials.PerRPCCredentials = basicAuth{}

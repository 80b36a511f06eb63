package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
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

// newTalosClient connects to the Talos API with the talosconfig at path. endpoints, when set, replace the
// talosconfig's. It also returns the talosconfig's context name, the default cluster name. The endpoint
// records why calls fail to reach it.
func newTalosClient(ctx context.Context, path string, endpoints []string, endpoint *talosEndpoint) (*client.Client, string, error) {
	cfg, err := clientconfig.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("failed to read talosconfig %q: %w", path, err)
	}

	opts := []client.OptionFunc{
		client.WithConfig(cfg),
		// gRPC's default reconnect backoff grows to two minutes: after a Talos API outage, the machines
		// waiting would wait that long again. Reconnecting within seconds costs one dial per attempt.
		client.WithGRPCDialOptions(grpc.WithConnectParams(talosConnectParams)),
		client.WithGRPCDialOptions(endpoint.dialOptions()...),
	}

	if len(endpoints) > 0 {
		opts = append(opts, client.WithEndpoints(endpoints...))
	}

	c, err := client.New(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("failed to create Talos API client from %q: %w", path, err)
	}

	return c, cfg.Context, nil
}

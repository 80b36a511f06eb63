package app

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/siderolabs/talos/pkg/machinery/client"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
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

// newTalosClient connects to the Talos API with the talosconfig at path. endpoints, when set, replace the
// talosconfig's. It also returns the talosconfig's context name, the default cluster name.
func newTalosClient(ctx context.Context, path string, endpoints []string) (*client.Client, string, error) {
	cfg, err := clientconfig.Open(path)
	if err != nil {
		return nil, "", fmt.Errorf("failed to read talosconfig %q: %w", path, err)
	}

	opts := []client.OptionFunc{client.WithConfig(cfg)}

	if len(endpoints) > 0 {
		opts = append(opts, client.WithEndpoints(endpoints...))
	}

	c, err := client.New(ctx, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("failed to create Talos API client from %q: %w", path, err)
	}

	return c, cfg.Context, nil
}

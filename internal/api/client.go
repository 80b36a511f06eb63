package api

import (
	"fmt"
	"path/filepath"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/protobuf/client"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Dial prepares a connection to the API at endpoint; it connects on the first call. A unix socket needs
// no credentials (its file mode does the access control), tcp:// uses TLS with opts.
func Dial(endpoint Endpoint, opts ClientOptions) (*grpc.ClientConn, error) {
	var (
		target string
		creds  credentials.TransportCredentials
	)

	switch endpoint.Network {
	case NetworkTCP:
		tlsConfig, err := clientTLSConfig(opts)
		if err != nil {
			return nil, err
		}

		target = "passthrough:///" + endpoint.Address
		creds = credentials.NewTLS(tlsConfig)
	default:
		path, err := filepath.Abs(endpoint.Address)
		if err != nil {
			return nil, fmt.Errorf("failed to resolve socket path %q: %w", endpoint.Address, err)
		}

		target = "unix://" + path
		creds = insecure.NewCredentials()
	}

	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("failed to create client for %s: %w", endpoint, err)
	}

	return conn, nil
}

// NewClientState is the COSI state served at conn. Watches fail instead of retrying, so that a client sees
// a stopped talos-ccm at once.
func NewClientState(conn grpc.ClientConnInterface) state.State {
	return state.WrapCore(client.NewAdapter(v1alpha1.NewStateClient(conn), client.WithDisableWatchRetry()))
}

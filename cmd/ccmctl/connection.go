package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/spf13/pflag"

	"github.com/talos-ccm/talos-ccm/internal/api"
	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
)

// endpointEnv overrides the default endpoint, as --endpoint does.
const endpointEnv = "CCMCTL_ENDPOINT"

// connection holds the connection flags and opens the API.
type connection struct {
	fs       *pflag.FlagSet
	endpoint string
	tls      api.ClientOptions
	timeout  time.Duration
	// used is the endpoint connected to, for messages.
	used string
}

// flags are the connection flags, shared by every command's flag set.
func (c *connection) flags() *pflag.FlagSet {
	if c.fs != nil {
		return c.fs
	}

	c.fs = pflag.NewFlagSet("ccmctl", pflag.ContinueOnError)
	c.fs.SetOutput(io.Discard)
	c.fs.StringVarP(&c.endpoint, "endpoint", "e", "", "talos-ccm API: a unix socket path, unix://PATH or tcp://HOST:PORT (default: $"+endpointEnv+", else the first socket found in "+fmt.Sprint(api.SocketCandidates())+")")
	c.fs.StringVar(&c.tls.CA, "tls-ca", "", "CA of the server certificate (tcp://)")
	c.fs.StringVar(&c.tls.Cert, "tls-cert", "", "client certificate (tcp://)")
	c.fs.StringVar(&c.tls.Key, "tls-key", "", "client key (tcp://)")
	c.fs.StringVar(&c.tls.ServerName, "tls-server-name", "", "name to verify the server certificate against (default: the endpoint's host)")
	c.fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "deadline of a request (get --watch runs until interrupted)")

	return c.fs
}

// open connects to the API; the function closes the connection.
func (c *connection) open() (state.State, func(), error) {
	target := c.endpoint
	if target == "" {
		target = os.Getenv(endpointEnv)
	}

	if target == "" {
		path, err := api.FindSocket()
		if err != nil {
			return nil, nil, err
		}

		target = path
	}

	endpoint, err := api.ParseEndpoint(target)
	if err != nil {
		return nil, nil, err
	}

	c.used = endpoint.String()

	if endpoint.Network == api.NetworkUnix {
		// Said plainly here rather than as gRPC's dial error.
		if _, statErr := os.Stat(endpoint.Address); errors.Is(statErr, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("cannot reach talos-ccm at %s: no such socket (is talos-ccm running with this --api-listen?)", c.used)
		}
	}

	conn, err := api.Dial(endpoint, c.tls)
	if err != nil {
		return nil, nil, err
	}

	return api.NewClientState(conn), func() { conn.Close() }, nil //nolint:errcheck
}

// describe turns an error into the lines shown to the user.
func (c *connection) describe(err error) string {
	return ccmctl.Describe(err, c.used)
}

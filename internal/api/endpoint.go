package api

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// SocketName is the file name of the API's unix socket.
const SocketName = "ccm.sock"

// ImageStateDir is the working directory of the talos-ccm container image, where deployments mount
// the state volume.
const ImageStateDir = "/var/lib/talos-ccm"

// Networks of an Endpoint.
const (
	NetworkUnix = "unix"
	NetworkTCP  = "tcp"
)

// Endpoint is where the API listens, or where a client connects.
type Endpoint struct {
	// Network is NetworkUnix or NetworkTCP.
	Network string
	// Address is the socket path (unix) or host:port (tcp).
	Address string
}

// ParseEndpoint parses an --api-listen or --endpoint value: "tcp://HOST:PORT", "unix://PATH", or a
// plain socket path.
func ParseEndpoint(s string) (Endpoint, error) {
	switch {
	case s == "":
		return Endpoint{}, errors.New("empty endpoint")
	case strings.HasPrefix(s, "tcp://"):
		addr := strings.TrimPrefix(s, "tcp://")

		if _, _, err := net.SplitHostPort(addr); err != nil {
			return Endpoint{}, fmt.Errorf("invalid endpoint %q: want tcp://HOST:PORT: %w", s, err)
		}

		return Endpoint{Network: NetworkTCP, Address: addr}, nil
	case strings.HasPrefix(s, "unix://"):
		path := strings.TrimPrefix(s, "unix://")
		if path == "" {
			return Endpoint{}, fmt.Errorf("invalid endpoint %q: no socket path", s)
		}

		return Endpoint{Network: NetworkUnix, Address: path}, nil
	case strings.HasPrefix(s, "unix:"):
		return ParseEndpoint("unix://" + strings.TrimPrefix(s, "unix:"))
	case strings.Contains(s, "://"):
		return Endpoint{}, fmt.Errorf("invalid endpoint %q: want a socket path, unix://PATH or tcp://HOST:PORT", s)
	default:
		return Endpoint{Network: NetworkUnix, Address: s}, nil
	}
}

// String formats the endpoint as ParseEndpoint reads it.
func (e Endpoint) String() string {
	return e.Network + "://" + e.Address
}

// DefaultSocket is the default --api-listen of talos-ccm: ccm.sock in the state directory or, when
// everything is kept in memory (no state directory), in RuntimeDir.
func DefaultSocket(stateDir string) string {
	if stateDir == "" {
		return filepath.Join(RuntimeDir(), SocketName)
	}

	return filepath.Join(stateDir, SocketName)
}

// RuntimeDir is the directory of the API socket of a talos-ccm without a state directory: a directory
// private to the user in the system's temporary directory ($TMPDIR, or /tmp).
func RuntimeDir() string {
	return filepath.Join(os.TempDir(), fmt.Sprintf("talos-ccm-%d", os.Getuid()))
}

// SocketCandidates lists, in order, where ccmctl looks for the API socket when no endpoint is given:
// talos-ccm's default state directory relative to the working directory (a local run, and the
// container image, whose working directory is ImageStateDir), the image's state directory itself (a
// deployment with --state-dir=/var/lib/talos-ccm), and the socket of a talos-ccm without a state
// directory.
func SocketCandidates() []string {
	return []string{
		filepath.Join("state", SocketName),
		filepath.Join(ImageStateDir, SocketName),
		filepath.Join(ImageStateDir, "state", SocketName),
		DefaultSocket(""),
	}
}

// FindSocket returns the first of SocketCandidates that is a unix socket.
func FindSocket() (string, error) {
	candidates := SocketCandidates()

	for _, path := range candidates {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Type() == os.ModeSocket {
			return path, nil
		}
	}

	return "", fmt.Errorf("no talos-ccm API socket found in %s: pass --endpoint", strings.Join(candidates, ", "))
}

// Package api serves talos-ccm's state over the COSI State gRPC service, read-only, so that ccmctl (or
// any COSI client) can inspect every fact and decision; it also holds what clients need to connect.
package api

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/protobuf/server"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// maxSocketPath is the longest unix socket path every supported OS accepts (sun_path is 104 bytes on
// BSDs and macOS, 108 on Linux, both including the terminating NUL).
const maxSocketPath = 103

// Options configure the API server.
type Options struct {
	// Listen is a unix socket path (or unix://PATH), or tcp://HOST:PORT.
	Listen string
	// TLSCert and TLSKey are the server's certificate and key, and ClientCA the CA that client certificates
	// must be issued by: all three are required with tcp:// (mutual TLS), and unused on a unix socket,
	// which file permissions protect.
	TLSCert, TLSKey, ClientCA string
}

// Server is the running API server.
type Server struct {
	grpc     *grpc.Server
	listener net.Listener
	logger   *zap.Logger
	served   chan struct{}
	endpoint Endpoint
	stopOnce sync.Once
}

// Start listens on opts.Listen and serves st read-only until ctx is done or Stop is called. A unix socket
// is created with mode 0600 (its directory with 0700 when missing); a stale socket left by a process
// that is gone is replaced, a live one is an error.
func Start(ctx context.Context, st state.CoreState, opts Options, logger *zap.Logger) (*Server, error) {
	endpoint, err := ParseEndpoint(opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("failed to parse --api-listen: %w", err)
	}

	serverOpts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(readOnlyUnary(logger)),
		grpc.ChainStreamInterceptor(readOnlyStream(logger)),
	}

	var listener net.Listener

	switch endpoint.Network {
	case NetworkTCP:
		if opts.TLSCert == "" || opts.TLSKey == "" || opts.ClientCA == "" {
			return nil, fmt.Errorf("--api-listen %s requires --api-tls-cert, --api-tls-key and --api-client-ca (mutual TLS)", endpoint)
		}

		tlsConfig, tlsErr := serverTLSConfig(opts, logger)
		if tlsErr != nil {
			return nil, tlsErr
		}

		serverOpts = append(serverOpts, grpc.Creds(credentials.NewTLS(tlsConfig)))

		listener, err = net.Listen("tcp", endpoint.Address)
		if err != nil {
			return nil, fmt.Errorf("failed to listen on %s: %w", endpoint, err)
		}
	default:
		listener, err = listenUnix(endpoint.Address)
		if err != nil {
			return nil, err
		}
	}

	s := &Server{
		grpc:     grpc.NewServer(serverOpts...),
		listener: listener,
		logger:   logger,
		served:   make(chan struct{}),
		endpoint: endpoint,
	}

	v1alpha1.RegisterStateServer(s.grpc, server.NewState(st))

	go func() {
		defer close(s.served)

		if serveErr := s.grpc.Serve(listener); serveErr != nil && !errors.Is(serveErr, grpc.ErrServerStopped) {
			logger.Error("api server failed", zap.Error(serveErr))
		}
	}()

	go func() {
		select {
		case <-ctx.Done():
			s.Stop()
		case <-s.served:
		}
	}()

	logger.Info("api listening", zap.Stringer("endpoint", s.Endpoint()))

	return s, nil
}

// Endpoint is where the server listens, with the port chosen by the system when tcp://HOST:0 was asked for.
func (s *Server) Endpoint() Endpoint {
	if s.endpoint.Network == NetworkTCP {
		return Endpoint{Network: NetworkTCP, Address: s.listener.Addr().String()}
	}

	return s.endpoint
}

// Stop closes every connection, ends every watch, removes the unix socket, and returns once the server has
// stopped. Watches never end by themselves, so a graceful stop would wait for clients forever.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		s.grpc.Stop()
		<-s.served

		if s.endpoint.Network == NetworkUnix {
			// The listener unlinks its socket on close; this covers a listener that never served.
			if err := os.Remove(s.endpoint.Address); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.logger.Warn("failed to remove api socket", zap.String("path", s.endpoint.Address), zap.Error(err))
			}
		}

		s.logger.Info("api stopped")
	})
}

// listenUnix creates the socket at path, readable and writable by the owner only.
func listenUnix(path string) (net.Listener, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("api socket path %q is longer than %d bytes, the limit of unix sockets: use a shorter --api-listen", path, maxSocketPath)
	}

	dir := filepath.Dir(path)

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to create api socket directory %q: %w", dir, err)
	}

	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("failed to listen on %s: the file exists and is not a socket", path)
		}

		if conn, dialErr := net.DialTimeout("unix", path, time.Second); dialErr == nil {
			conn.Close() //nolint:errcheck

			return nil, fmt.Errorf("failed to listen on %s: another process serves it (a second talos-ccm with the same --state-dir?)", path)
		}

		// Nobody answers: a socket left behind by a process that did not stop cleanly.
		if err = os.Remove(path); err != nil {
			return nil, fmt.Errorf("failed to remove stale api socket %q: %w", path, err)
		}
	}

	listener, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("failed to listen on %s: %w", path, err)
	}

	if err = os.Chmod(path, 0o600); err != nil {
		listener.Close() //nolint:errcheck

		return nil, fmt.Errorf("failed to restrict api socket %q: %w", path, err)
	}

	return listener, nil
}

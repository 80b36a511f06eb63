package talossim

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/cosi-project/runtime/pkg/state/protobuf/server"
	clientconfig "github.com/siderolabs/talos/pkg/machinery/client/config"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

// DefaultClusterName is the default talosconfig context name.
const DefaultClusterName = "talos-sim"

// ServerConfig says where a Server listens.
type ServerConfig struct {
	// Listen is the TCP address of the TLS endpoint, e.g. "127.0.0.1:0"; empty for none.
	Listen string
	// Unix is the path of a plain-text unix socket endpoint; empty for none.
	Unix string
	// ClusterName names the talosconfig context (DefaultClusterName when empty).
	ClusterName string
	// TalosconfigPath is where the talosconfig for the TLS endpoint is written; empty for nowhere.
	TalosconfigPath string
	// PKI is the certificate authority and certificates to use; generated when nil.
	PKI *PKI
}

// Server serves the COSI State service of a Fleet as apid does: one endpoint for every machine,
// each request routed to the machine named by its `node` metadata.
type Server struct {
	logger *zap.Logger

	// mu guards servers, listens and paused (see server_outage.go).
	mu      sync.Mutex
	servers []*grpc.Server
	listens []listenAddr
	paused  bool
	wg      sync.WaitGroup

	endpoint        string
	unixPath        string
	pki             *PKI
	talosconfig     *clientconfig.Config
	talosconfigPath string
}

// StartServer listens on the configured endpoints and serves the fleet until Stop.
func StartServer(fleet *Fleet, cfg ServerConfig, logger *zap.Logger) (s *Server, err error) {
	if cfg.Listen == "" && cfg.Unix == "" {
		return nil, errors.New("failed to start server: neither a TCP address nor a unix socket is configured")
	}

	if cfg.ClusterName == "" {
		cfg.ClusterName = DefaultClusterName
	}

	s = &Server{logger: logger}

	defer func() {
		if err != nil {
			s.Stop()
		}
	}()

	ic := &interceptors{fleet: fleet, logger: logger}
	opts := []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(ic.unary),
		grpc.ChainStreamInterceptor(ic.stream),
	}

	if cfg.Listen != "" {
		if err = s.listenTLS(cfg, opts); err != nil {
			return nil, err
		}
	}

	if cfg.Unix != "" {
		if err = s.listenUnix(cfg.Unix, opts); err != nil {
			return nil, err
		}
	}

	return s, nil
}

func (s *Server) listenTLS(cfg ServerConfig, opts []grpc.ServerOption) error {
	s.pki = cfg.PKI

	if s.pki == nil {
		var err error

		if s.pki, err = NewPKI(); err != nil {
			return err
		}
	}

	tlsConfig, err := s.pki.ServerTLSConfig()
	if err != nil {
		return err
	}

	lis, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("failed to listen on %q: %w", cfg.Listen, err)
	}

	s.endpoint = lis.Addr().String()
	s.talosconfig = &clientconfig.Config{
		Context: cfg.ClusterName,
		Contexts: map[string]*clientconfig.Context{
			cfg.ClusterName: {
				Endpoints: []string{s.endpoint},
				CA:        base64.StdEncoding.EncodeToString(s.pki.CAPEM),
				Crt:       base64.StdEncoding.EncodeToString(s.pki.ClientCertPEM),
				Key:       base64.StdEncoding.EncodeToString(s.pki.ClientKeyPEM),
			},
		},
	}

	s.serve(listenAddr{network: "tcp", address: s.endpoint, opts: append(opts, grpc.Creds(credentials.NewTLS(tlsConfig)))}, lis)

	if cfg.TalosconfigPath != "" {
		if err = writeTalosconfig(s.talosconfig, cfg.TalosconfigPath); err != nil {
			return err
		}

		s.talosconfigPath = cfg.TalosconfigPath
	}

	s.logger.Info("serving talos api", zap.String("endpoint", s.endpoint), zap.String("talosconfig", s.talosconfigPath))

	return nil
}

// writeTalosconfig writes the talosconfig atomically (through a rename), so that a process waiting
// for the file never reads half of it.
func writeTalosconfig(cfg *clientconfig.Config, path string) error {
	data, err := cfg.Bytes()
	if err != nil {
		return fmt.Errorf("failed to encode talosconfig: %w", err)
	}

	tmp := path + ".tmp"

	if err = os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("failed to write talosconfig: %w", err)
	}

	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("failed to write talosconfig: %w", err)
	}

	return nil
}

func (s *Server) listenUnix(path string, opts []grpc.ServerOption) error {
	// A socket left over by a previous run would make the listen fail.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("failed to remove stale socket: %w", err)
	}

	lis, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("failed to listen on %q: %w", path, err)
	}

	s.unixPath = path
	s.serve(listenAddr{network: "unix", address: path, opts: opts}, lis)

	s.logger.Info("serving talos api", zap.String("unix", path))

	return nil
}

// serve serves the State service on lis, and remembers the endpoint to listen on again after a Pause.
func (s *Server) serve(ep listenAddr, lis net.Listener) {
	s.mu.Lock()
	s.listens = append(s.listens, ep)
	s.mu.Unlock()

	s.serveOn(ep, lis)
}

func (s *Server) serveOn(ep listenAddr, lis net.Listener) {
	srv := grpc.NewServer(ep.opts...)
	v1alpha1.RegisterStateServer(srv, server.NewState(router{}))

	s.mu.Lock()
	s.servers = append(s.servers, srv)
	s.mu.Unlock()

	s.wg.Go(func() {
		if err := srv.Serve(lis); err != nil {
			s.logger.Error("grpc server failed", zap.String("address", lis.Addr().String()), zap.Error(err))
		}
	})
}

// Endpoint returns the TLS endpoint address (host:port), empty when there is none.
func (s *Server) Endpoint() string { return s.endpoint }

// UnixPath returns the unix socket path, empty when there is none.
func (s *Server) UnixPath() string { return s.unixPath }

// PKI returns the certificates of the TLS endpoint (nil when there is none).
func (s *Server) PKI() *PKI { return s.pki }

// Talosconfig returns the client configuration for the TLS endpoint (nil when there is none).
func (s *Server) Talosconfig() *clientconfig.Config { return s.talosconfig }

// TalosconfigPath returns where the talosconfig was written, empty when it was not.
func (s *Server) TalosconfigPath() string { return s.talosconfigPath }

// Stop ends every open request and stream and closes the listeners.
func (s *Server) Stop() {
	// A stopped server stays stopped: Resume has nothing to listen on again.
	s.mu.Lock()
	s.paused = false
	s.listens = nil
	s.mu.Unlock()

	s.stopServers()

	if s.unixPath != "" {
		if err := os.Remove(s.unixPath); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.logger.Warn("failed to remove socket", zap.String("unix", s.unixPath), zap.Error(err))
		}
	}
}

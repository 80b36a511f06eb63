package talossim

import (
	"errors"
	"fmt"
	"net"

	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// listenAddr is one endpoint a Server listens on, kept so that Resume can listen there again.
type listenAddr struct {
	network string
	address string
	opts    []grpc.ServerOption
}

// Pause takes the whole endpoint down, as an apid restart or a network outage would: the listeners close,
// every open request and stream ends, and new connections are refused until Resume. The fleet and its
// knobs are untouched. Pausing a paused server does nothing.
func (s *Server) Pause() {
	s.mu.Lock()
	s.paused = true
	s.mu.Unlock()

	s.stopServers()

	s.logger.Info("talos api paused")
}

// Resume listens again on the addresses the server had before Pause (the same TCP port and unix socket
// path, with the same certificates), so that clients reconnect to what they were configured with.
// Resuming a server that is not paused does nothing.
func (s *Server) Resume() error {
	s.mu.Lock()
	paused := s.paused
	listens := s.listens
	s.paused = false
	s.mu.Unlock()

	if !paused {
		return nil
	}

	var errs []error

	for _, ep := range listens {
		lis, err := net.Listen(ep.network, ep.address)
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to listen again on %q: %w", ep.address, err))

			continue
		}

		s.serveOn(ep, lis)
	}

	if err := errors.Join(errs...); err != nil {
		return err
	}

	s.logger.Info("talos api resumed", zap.Int("endpoints", len(listens)))

	return nil
}

// stopServers stops every gRPC server (Stop, not GracefulStop: watches never end by themselves) and waits
// for them; their listeners close with them.
func (s *Server) stopServers() {
	s.mu.Lock()
	servers := s.servers
	s.servers = nil
	s.mu.Unlock()

	for _, srv := range servers {
		srv.Stop()
	}

	s.wg.Wait()
}

package talossim

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// readMethods are the only State methods served; every other one is a write and is refused.
var readMethods = map[string]bool{
	v1alpha1.State_Get_FullMethodName:   true,
	v1alpha1.State_List_FullMethodName:  true,
	v1alpha1.State_Watch_FullMethodName: true,
}

// interceptors route every request to a machine as apid does (the `node` metadata key), refuse what
// apid or a read-only Talos API would refuse, and apply the machine's fault knobs.
type interceptors struct {
	fleet  *Fleet
	logger *zap.Logger
}

// admit resolves the machine of a request and waits for its latency. The returned context carries
// the machine; down is closed when the machine becomes unreachable or is removed.
func (i *interceptors) admit(ctx context.Context, method string) (context.Context, *simMachine, <-chan struct{}, error) {
	md, _ := metadata.FromIncomingContext(ctx)

	if len(md.Get("nodes")) > 0 {
		return nil, nil, nil, status.Error(codes.InvalidArgument,
			"talos-sim: one-to-many proxying (nodes metadata, client.WithNodes) is not supported for COSI methods, use client.WithNode")
	}

	nodes := md.Get("node")

	switch len(nodes) {
	case 0:
		return nil, nil, nil, status.Error(codes.InvalidArgument,
			"talos-sim: the node metadata is required (client.WithNode): the endpoint is not a machine")
	case 1:
	default:
		return nil, nil, nil, status.Errorf(codes.InvalidArgument, "talos-sim: expected one node in the node metadata, got %d", len(nodes))
	}

	sm, ok := i.fleet.route(nodes[0])
	if !ok {
		return nil, nil, nil, status.Errorf(codes.NotFound, "talos-sim: unknown node %q: no machine has this name or IP", nodes[0])
	}

	a := sm.admit()
	if a.err != nil {
		return nil, nil, nil, status.Errorf(codes.Unavailable, "talos-sim: node %q (%s): %v", nodes[0], a.name, a.err)
	}

	if a.latency > 0 {
		timer := time.NewTimer(a.latency)
		defer timer.Stop()

		select {
		case <-timer.C:
		case <-a.down:
			return nil, nil, nil, status.Errorf(codes.Unavailable, "talos-sim: node %q (%s) became unreachable", nodes[0], a.name)
		case <-ctx.Done():
			return nil, nil, nil, status.FromContextError(ctx.Err()).Err()
		}
	}

	if !readMethods[method] {
		return nil, nil, nil, errReadOnly()
	}

	i.logger.Debug("request", zap.String("method", method), zap.String("node", nodes[0]), zap.String("machine", a.name))

	return withMachine(ctx, sm), sm, a.down, nil
}

// unary is the unary server interceptor.
func (i *interceptors) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	ctx, _, _, err := i.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}

	return handler(ctx, req)
}

// stream is the stream server interceptor: streams (List, Watch) end with Unavailable as soon as
// their machine becomes unreachable or is removed.
func (i *interceptors) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx, sm, down, err := i.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var cut atomic.Bool

	go func() {
		select {
		case <-down:
			cut.Store(true)
			cancel()
		case <-ctx.Done():
		}
	}()

	err = handler(srv, &routedStream{ServerStream: ss, ctx: ctx})

	if cut.Load() {
		return unavailable(sm)
	}

	if errors.Is(err, context.Canceled) {
		return status.FromContextError(err).Err()
	}

	return err
}

func unavailable(sm *simMachine) error {
	a := sm.admit()
	if a.err == nil {
		// Reachable again already: the stream was cut all the same.
		a.err = errors.New("machine was unreachable")
	}

	return status.Errorf(codes.Unavailable, "talos-sim: node %s: %v", a.name, a.err)
}

// routedStream is a server stream whose context carries the routed machine.
type routedStream struct {
	grpc.ServerStream

	ctx context.Context //nolint:containedctx // A grpc.ServerStream carries its context.
}

func (s *routedStream) Context() context.Context {
	return s.ctx
}

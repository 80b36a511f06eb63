package api

import (
	"context"
	"path"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// readMethods are the State calls that only read. Every other call (create, update, destroy, teardown,
// and the finalizer changes that clients make through update) is refused, and so is any method a later
// version of the service adds, until it is reviewed and listed here.
var readMethods = map[string]bool{
	v1alpha1.State_Get_FullMethodName:   true,
	v1alpha1.State_List_FullMethodName:  true,
	v1alpha1.State_Watch_FullMethodName: true,
}

// readOnlyUnary refuses unary calls that are not reads with PermissionDenied.
func readOnlyUnary(logger *zap.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if !readMethods[info.FullMethod] {
			return nil, refuse(ctx, logger, info.FullMethod)
		}

		return handler(ctx, req)
	}
}

// readOnlyStream refuses streaming calls that are not reads with PermissionDenied.
func readOnlyStream(logger *zap.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if !readMethods[info.FullMethod] {
			return refuse(ss.Context(), logger, info.FullMethod)
		}

		return handler(srv, ss)
	}
}

func refuse(ctx context.Context, logger *zap.Logger, method string) error {
	from := "unknown"

	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		from = p.Addr.String()
	}

	logger.Warn("api write refused", zap.String("method", method), zap.String("peer", from))

	return status.Errorf(codes.PermissionDenied, "the talos-ccm API is read-only: %s is not allowed", path.Base(method))
}

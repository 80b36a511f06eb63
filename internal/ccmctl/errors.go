package ccmctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Describe turns an error of a command into what the user reads: transport errors say which endpoint
// could not be reached and why, in one line, without gRPC's layers of wrapping.
func Describe(err error, endpoint string) string {
	if endpoint == "" {
		endpoint = "the endpoint"
	}

	s, isStatus := status.FromError(err)

	switch {
	case errors.Is(err, context.DeadlineExceeded) || (isStatus && s.Code() == codes.DeadlineExceeded):
		return fmt.Sprintf("talos-ccm at %s did not answer in time", endpoint)
	case isStatus && s.Code() == codes.Unavailable:
		return fmt.Sprintf("cannot reach talos-ccm at %s: %s", endpoint, transportCause(s.Message()))
	case isStatus && s.Code() == codes.PermissionDenied:
		return s.Message()
	}

	return err.Error()
}

// transportCause keeps the innermost cause of a gRPC transport message such as
// `connection error: desc = "transport: Error while dialing: dial unix /x: connect: connection refused"`.
func transportCause(msg string) string {
	for _, prefix := range []string{"connection error: desc = ", "transport: ", "Error while dialing: ", "authentication handshake failed: "} {
		if i := strings.LastIndex(msg, prefix); i >= 0 {
			msg = msg[i+len(prefix):]
		}

		msg = strings.Trim(msg, `"`)
	}

	return msg
}

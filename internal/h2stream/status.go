package h2stream

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// responseError checks the headers that open a response: nil when they open a gRPC response.
func responseError(fields []hpack.HeaderField) error {
	var httpStatus, contentType, encoding string

	for _, f := range fields {
		switch f.Name {
		case ":status":
			httpStatus = f.Value
		case "content-type":
			contentType = f.Value
		case "grpc-encoding":
			encoding = f.Value
		}
	}

	switch {
	case httpStatus != "200":
		return status.Error(httpCode(httpStatus), "unexpected HTTP status "+strconv.Quote(httpStatus))
	case contentType != "application/grpc" && !strings.HasPrefix(contentType, "application/grpc+") && !strings.HasPrefix(contentType, "application/grpc;"):
		return status.Error(codes.Internal, "unexpected content-type "+strconv.Quote(contentType))
	case encoding != "" && encoding != "identity":
		return status.Error(codes.Internal, "grpc: compressed response ("+strconv.Quote(encoding)+"), though no compression was negotiated")
	}

	return nil
}

// trailerError is the status of a response's trailers (or of a trailers-only response, whose HTTP status
// says what went wrong when they carry no gRPC status): nil for OK.
func trailerError(fields []hpack.HeaderField, trailersOnly bool) error {
	var code, message, httpStatus string

	found := false

	for _, f := range fields {
		switch f.Name {
		case "grpc-status":
			code, found = f.Value, true
		case "grpc-message":
			message = f.Value
		case ":status":
			httpStatus = f.Value
		}
	}

	if !found {
		if trailersOnly && httpStatus != "200" {
			return status.Error(httpCode(httpStatus), "unexpected HTTP status "+strconv.Quote(httpStatus))
		}

		return status.Error(codes.Internal, "grpc: the server ended the stream without a status")
	}

	n, err := strconv.ParseUint(code, 10, 32)
	if err != nil {
		return status.Error(codes.Internal, "grpc: the server sent an invalid status "+strconv.Quote(code))
	}

	if n == uint64(codes.OK) {
		return nil
	}

	return status.Error(codes.Code(n), decodeMessage(message))
}

// httpCode is the gRPC code of an HTTP status that is not a gRPC response, as gRPC maps them.
func httpCode(httpStatus string) codes.Code {
	n, _ := strconv.Atoi(httpStatus)

	switch n {
	case http.StatusBadRequest:
		return codes.Internal
	case http.StatusUnauthorized:
		return codes.Unauthenticated
	case http.StatusForbidden:
		return codes.PermissionDenied
	case http.StatusNotFound:
		return codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return codes.Unavailable
	default:
		return codes.Unknown
	}
}

// resetError is the error of a stream the server reset with code.
func resetError(code http2.ErrCode) error {
	switch code {
	case http2.ErrCodeCancel:
		return status.Error(codes.Canceled, "the server canceled the stream")
	case http2.ErrCodeRefusedStream:
		return status.Error(codes.Unavailable, "the server refused the stream")
	default:
		return status.Error(codes.Internal, "the server reset the stream: "+code.String())
	}
}

// decodeMessage decodes a grpc-message, percent-encoded; an invalid escape stays as it is.
func decodeMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}

	var b strings.Builder

	b.Grow(len(s))

	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b.WriteByte(byte(n))

				i += 2

				continue
			}
		}

		b.WriteByte(s[i])
	}

	return b.String()
}

// encodeTimeout is the grpc-timeout of d: at most eight digits, in the finest unit they allow, rounded up.
func encodeTimeout(d time.Duration) string {
	const maxDigits = 1e8

	units := []struct {
		unit   time.Duration
		suffix string
	}{{time.Nanosecond, "n"}, {time.Microsecond, "u"}, {time.Millisecond, "m"}, {time.Second, "S"}, {time.Minute, "M"}, {time.Hour, "H"}}

	for _, u := range units {
		n := d / u.unit
		if d%u.unit != 0 {
			n++
		}

		if n < maxDigits {
			return strconv.FormatInt(int64(n), 10) + u.suffix
		}
	}

	return strconv.FormatInt(maxDigits-1, 10) + "H"
}

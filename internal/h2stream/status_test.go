package h2stream

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEncodeTimeout checks grpc-timeout's form: at most eight digits, the finest unit, rounded up.
func TestEncodeTimeout(t *testing.T) {
	t.Parallel()

	for d, want := range map[time.Duration]string{
		time.Nanosecond:                  "1n",
		99999999 * time.Nanosecond:       "99999999n",
		100 * time.Millisecond:           "100000u",
		10*time.Second + time.Nanosecond: "10000001u",
		30 * time.Minute:                 "1800000m",
		1000 * time.Hour:                 "3600000S",
		time.Duration(1<<63 - 1):         "2562048H",
	} {
		assert.Equal(t, want, encodeTimeout(d), d.String())
	}
}

// TestDecodeMessage checks the percent-decoding of grpc-message: an invalid escape stays as it is.
func TestDecodeMessage(t *testing.T) {
	t.Parallel()

	for in, want := range map[string]string{
		"plain":          "plain",
		"100%25 %C3%A9":  "100% é",
		"bad %zz %4":     "bad %zz %4",
		"%":              "%",
		"end %2":         "end %2",
		"%41%42%43":      "ABC",
		"sign %+1 %-1 x": "sign %+1 %-1 x",
	} {
		assert.Equal(t, want, decodeMessage(in), in)
	}
}

// TestResponseAndTrailerErrors checks the statuses of responses that are not gRPC's, or end oddly.
func TestResponseAndTrailerErrors(t *testing.T) {
	t.Parallel()

	field := func(kv ...string) []hpack.HeaderField {
		var out []hpack.HeaderField
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}

		return out
	}

	assert.NoError(t, responseError(field(":status", "200", "content-type", "application/grpc+proto")))
	assert.Equal(t, codes.Unavailable, status.Code(responseError(field(":status", "503", "content-type", "application/grpc"))))
	assert.Equal(t, codes.Internal, status.Code(responseError(field(":status", "200", "content-type", "text/html"))))
	assert.Equal(t, codes.Internal, status.Code(responseError(field(":status", "200", "content-type", "application/grpc", "grpc-encoding", "gzip"))))
	assert.Equal(t, codes.Unauthenticated, status.Code(trailerError(field(":status", "401"), true)))
	assert.Equal(t, codes.Internal, status.Code(trailerError(field("grpc-message", "no status"), false)))
	assert.Equal(t, codes.Internal, status.Code(trailerError(field("grpc-status", "-1"), false)))
	assert.NoError(t, trailerError(field("grpc-status", "0"), false))
}

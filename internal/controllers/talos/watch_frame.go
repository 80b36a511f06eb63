package talos

import (
	"fmt"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	protobuf "google.golang.org/protobuf/proto"
)

// watchFrame is one message of a watch stream as it came, not decoded yet: the goroutine that waits on a
// stream receives frames, and hands them to a goroutine of their own for decoding (see addressWatch). The
// decoding of a message with nested messages is the deepest part of receiving one, and would otherwise set
// the size of the waiting goroutine's stack.
type watchFrame []byte

// decode decodes the frame into the watch's message.
func (f watchFrame) decode() (*v1alpha1.WatchResponse, error) {
	var msg v1alpha1.WatchResponse

	if err := protobuf.Unmarshal(f, &msg); err != nil {
		return nil, fmt.Errorf("failed to decode a watch message: %w", err)
	}

	return &msg, nil
}

// watchFrames is the codec of the watch streams: gRPC's protobuf codec, except that a watchFrame receives
// the message undecoded.
type watchFrames struct {
	encoding.CodecV2
}

// watchFramesCodec makes a call's messages received into a watchFrame stay undecoded.
var watchFramesCodec = grpc.ForceCodecV2(watchFrames{CodecV2: encoding.GetCodecV2(proto.Name)})

// Unmarshal implements encoding.CodecV2.
func (c watchFrames) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*watchFrame); ok {
		*f = data.Materialize()

		return nil
	}

	return c.CodecV2.Unmarshal(data, v) //nolint:wrapcheck // gRPC's codec, whose errors gRPC reports.
}

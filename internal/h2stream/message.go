package h2stream

import (
	"encoding/binary"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// messagePrefix is the length of the prefix of a gRPC message on the wire: a flag byte (compressed or
// not), then the message's length, big-endian.
const messagePrefix = 5

// messageReader reassembles the gRPC messages of a stream from its data, as it arrives in pieces of any
// size. A message longer than max is refused from its prefix, before anything is allocated for it.
type messageReader struct {
	max int
	// head is the prefix of the message being read, headLen bytes of it so far.
	head    [messagePrefix]byte
	headLen int
	// body is what arrived of the message's body so far; want its length, known once head is complete.
	body []byte
	want int
}

// feed reads data: it returns a complete message and how many bytes of data it took, or ok false when it
// took all of data and the message is not complete yet. The message may be a part of data.
func (r *messageReader) feed(data []byte) (msg []byte, n int, ok bool, err error) {
	if r.headLen < messagePrefix {
		n = copy(r.head[r.headLen:], data)
		r.headLen += n

		if r.headLen < messagePrefix {
			return nil, n, false, nil
		}

		if err = r.start(); err != nil {
			return nil, n, false, err
		}
	}

	rest := data[n:]
	need := r.want - len(r.body)

	if r.body == nil && len(rest) >= need {
		// The whole body is here: no copy.
		r.reset()

		return rest[:need:need], n + need, true, nil
	}

	if len(rest) < need {
		r.body = append(r.body, rest...)

		return nil, len(data), false, nil
	}

	r.body = append(r.body, rest[:need]...)
	msg = r.body
	r.reset()

	return msg, n + need, true, nil
}

// start checks the prefix of a message.
func (r *messageReader) start() error {
	switch r.head[0] {
	case 0:
	case 1:
		return status.Error(codes.Internal, "grpc: received a compressed message, though no compression was negotiated")
	default:
		return status.Errorf(codes.Internal, "grpc: received a message with an invalid flag %#x", r.head[0])
	}

	length := binary.BigEndian.Uint32(r.head[1:])
	if int64(length) > int64(r.max) {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", length, r.max)
	}

	r.want = int(length)

	return nil
}

// reset makes the reader wait for the next message.
func (r *messageReader) reset() {
	r.headLen, r.body, r.want = 0, nil, 0
}

// partial reports whether a message was started and not completed.
func (r *messageReader) partial() bool {
	return r.headLen > 0
}

package h2stream

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FuzzMessageReader feeds hostile bytes, in pieces of hostile sizes, to the reader of gRPC messages: it
// never panics, and never returns a message longer than its maximum.
func FuzzMessageReader(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 3, 'a', 'b', 'c', 0, 0, 0, 0, 0}, uint8(2))
	f.Add([]byte{1, 0, 0, 0, 1, 'a'}, uint8(1))
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff}, uint8(0))

	f.Fuzz(func(t *testing.T, data []byte, piece uint8) {
		r := messageReader{max: 64}
		size := int(piece)%7 + 1

		for len(data) > 0 {
			chunk := data[:min(size, len(data))]

			for len(chunk) > 0 {
				msg, n, ok, err := r.feed(chunk)
				if err != nil {
					return
				}

				if n == 0 && !ok {
					t.Fatal("the reader took nothing")
				}

				if len(msg) > r.max {
					t.Fatalf("a message of %d bytes, over the maximum", len(msg))
				}

				chunk = chunk[n:]
			}

			data = data[len(data[:min(size, len(data))]):]
		}
	})
}

// FuzzConn has a server answer a stream with hostile bytes: the client never panics, and the stream ends.
func FuzzConn(f *testing.F) {
	f.Add(validResponse(f, false))
	f.Add(validResponse(f, true))
	f.Add([]byte{0, 0, 0, 4, 0, 0, 0, 0, 0})

	f.Fuzz(func(t *testing.T, response []byte) {
		client, server := net.Pipe()

		c, err := New(Options{
			Endpoints: []Endpoint{{Address: "talos:50000"}},
			Dial:      func(context.Context, string) (net.Conn, error) { return client, nil },
		})
		if err != nil {
			t.Fatal(err)
		}

		defer c.Close() //nolint:errcheck

		go func() {
			_, _ = io.Copy(io.Discard, server)
		}()

		go func() {
			_, _ = server.Write(response)
			_ = server.Close()
		}()

		s, err := call(t.Context(), c, sendMethod, "count=1")
		if err != nil {
			return
		}

		for range 100 {
			if _, err = recv(s); err != nil {
				return
			}
		}
	})
}

// validResponse is what a server sends to answer a stream: its settings, the response's headers, a
// message, its trailers (split in a header block and a continuation with split).
func validResponse(tb testing.TB, split bool) []byte {
	tb.Helper()

	var out, block bytes.Buffer

	fr := http2.NewFramer(&out, nil)
	enc := hpack.NewEncoder(&block)

	headers := func(end bool, fields ...hpack.HeaderField) {
		block.Reset()

		for _, f := range fields {
			_ = enc.WriteField(f)
		}

		b := block.Bytes()
		if split && len(b) > 1 {
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:1], EndStream: end})
			_ = fr.WriteContinuation(1, true, b[1:])

			return
		}

		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b, EndStream: end, EndHeaders: true})
	}

	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1})
	_ = fr.WriteWindowUpdate(0, 100)
	_ = fr.WritePing(false, [8]byte{1})
	headers(false, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})

	msg, err := proto.Marshal(wrapperspb.Bytes([]byte("hello")))
	if err != nil {
		tb.Fatal(err)
	}

	_ = fr.WriteData(1, false, append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...))
	headers(true, hpack.HeaderField{Name: "grpc-status", Value: "0"})
	_ = fr.WriteGoAway(1, http2.ErrCodeNo, nil)

	return out.Bytes()
}

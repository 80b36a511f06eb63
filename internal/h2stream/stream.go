package h2stream

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// stream is a server-streaming call. Its caller receives its messages on its own goroutine: the
// connection's goroutine only queues the stream's data, and its context's end is seen by
// context.AfterFunc.
type stream struct {
	client *Client
	// ctx is the call's: a stream is the call itself, as gRPC's are (grpc.ClientStream.Context).
	ctx    context.Context //nolint:containedctx // See above.
	method string
	codec  encoding.CodecV2
	// req is the request, prefixed, until it is sent.
	req []byte

	// conn is the stream's connection, once it is open; id its identifier there.
	conn *conn
	id   uint32

	// Guarded by conn.mu: gotHeaders is set once the response's headers arrived; recvWindow is what the
	// server may still send on the stream; sendWindow what the client may; credit what the caller read
	// and was not given back to the server yet; in the data queued for the caller; err why the stream
	// ended (io.EOF: an OK status), nil while it lasts; stop undoes the AfterFunc of ctx.
	gotHeaders bool
	recvWindow int64
	sendWindow int64
	credit     int64
	in         []byte
	err        error
	stop       func() bool

	// ready holds a token when in or err changed since the caller last looked.
	ready chan struct{}
	// notify is what OnReady was given, until the stream calls it.
	notify atomic.Pointer[func()]

	// pending is the data the caller took from in and did not read yet; reader reads it; failed is the
	// error RecvMsg returned, which it returns again. Only the caller uses them.
	pending []byte
	reader  messageReader
	failed  error
}

// signal wakes the stream's caller, or calls what it gave OnReady.
func (s *stream) signal() {
	s.callBack()

	select {
	case s.ready <- struct{}{}:
	default:
	}
}

// Context implements grpc.ClientStream.
func (s *stream) Context() context.Context { return s.ctx }

// Header implements grpc.ClientStream: the response's headers are not kept.
func (s *stream) Header() (metadata.MD, error) { return nil, nil }

// Trailer implements grpc.ClientStream: the response's trailers are not kept.
func (s *stream) Trailer() metadata.MD { return nil }

// SendMsg implements grpc.ClientStream: it encodes the request, which CloseSend sends.
func (s *stream) SendMsg(m any) error {
	if s.req != nil || s.conn != nil {
		return status.Error(codes.Internal, "grpc: a server-streaming call sends a single request")
	}

	data, err := s.codec.Marshal(m)
	if err != nil {
		return status.Errorf(codes.Internal, "grpc: failed to encode the request: %v", err)
	}

	defer data.Free()

	n := data.Len()
	if n > s.client.opts.MaxMessage {
		return status.Errorf(codes.ResourceExhausted, "grpc: the request is larger than max (%d vs. %d)", n, s.client.opts.MaxMessage)
	}

	s.req = make([]byte, messagePrefix+n)
	s.req[1], s.req[2], s.req[3], s.req[4] = byte(n>>24), byte(n>>16), byte(n>>8), byte(n) //nolint:gosec // At most MaxMessage.
	data.CopyTo(s.req[messagePrefix:])

	return nil
}

// CloseSend implements grpc.ClientStream: it opens the stream, and sends its request.
func (s *stream) CloseSend() error {
	if s.conn != nil || s.req == nil {
		return status.Error(codes.Internal, "grpc: CloseSend without a request, or twice")
	}

	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}

	headers, err := s.headers()
	if err != nil {
		return err
	}

	// A connection that fails or goes away between its choice and the stream's opening leaves the choice
	// to another.
	for range 3 {
		var c *conn

		if c, err = s.client.pick(s.ctx); err != nil {
			return err
		}

		if err = s.open(c, headers); err == nil {
			break
		}
	}

	if err != nil {
		return err
	}

	return s.send()
}

// open opens the stream on c: it sends its headers.
func (s *stream) open(c *conn, headers []hpack.HeaderField) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()

	c.mu.Lock()

	switch {
	case c.err != nil || c.goingAway || c.nextID > maxStreamID:
		c.mu.Unlock()

		return status.Error(codes.Unavailable, "the connection takes no new stream")
	case uint64(len(c.streams)) >= uint64(c.peerMaxStreams):
		c.mu.Unlock()

		return status.Errorf(codes.Unavailable, "the server's limit of %d concurrent streams is reached", c.peerMaxStreams)
	}

	s.conn, s.id = c, c.nextID
	c.nextID += 2
	s.recvWindow, s.sendWindow = streamWindow, c.peerWindow
	s.ready = make(chan struct{}, 1)
	c.streams[s.id] = s
	c.unpark()
	maxFrame := int(c.peerMaxFrame)
	// The stream is registered before its context's AfterFunc, which ends it: the function runs on a
	// goroutine of its own, which waits for the lock.
	s.stop = context.AfterFunc(s.ctx, s.cancel)

	c.mu.Unlock()

	c.hbuf.Reset()

	for _, h := range headers {
		if h.Name == ":authority" {
			h.Value = c.authority
		}

		_ = c.henc.WriteField(h)
	}

	block := c.hbuf.Bytes()

	// The failure of the write fails the connection, and ends the stream with it.
	_ = c.writeLocked(func() error {
		first := block[:min(len(block), maxFrame)]
		block = block[len(first):]

		err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, BlockFragment: first, EndHeaders: len(block) == 0})

		for err == nil && len(block) > 0 {
			next := block[:min(len(block), maxFrame)]
			block = block[len(next):]
			err = c.fr.WriteContinuation(s.id, len(block) == 0, next)
		}

		return err
	})

	return nil
}

// send sends the request, as the flow-control windows allow, and ends the client's half of the stream.
func (s *stream) send() error {
	c := s.conn
	data := s.req
	s.req = nil

	for len(data) > 0 {
		c.mu.Lock()

		for s.err == nil && (c.sendWindow <= 0 || s.sendWindow <= 0) {
			c.cond.Wait()
		}

		if s.err != nil {
			c.mu.Unlock()

			// The stream ended before its request was sent (the server answered at once, or the stream or
			// the connection failed): RecvMsg says how, as gRPC's streams do.
			return nil
		}

		n := int(min(int64(len(data)), c.sendWindow, s.sendWindow, int64(c.peerMaxFrame)))
		c.sendWindow -= int64(n)
		s.sendWindow -= int64(n)

		c.mu.Unlock()

		chunk := data[:n]
		data = data[n:]

		if err := c.write(func() error { return c.fr.WriteData(s.id, len(data) == 0, chunk) }); err != nil {
			return err
		}
	}

	return nil
}

// cancel ends the stream when its context ends.
func (s *stream) cancel() {
	s.conn.end(s, status.FromContextError(s.ctx.Err()).Err(), true)
}

// RecvMsg implements grpc.ClientStream: it waits, on the caller's goroutine, for the stream's next
// message, and decodes it into m. It returns io.EOF once the stream ended with an OK status.
func (s *stream) RecvMsg(m any) error {
	if s.failed == nil {
		s.failed = s.recv(m)
		if s.failed == nil {
			return nil
		}

		s.pending, s.reader = nil, messageReader{}
	}

	return s.failed
}

// Await waits until the stream has data its caller did not read yet, or ended: RecvMsg then returns without
// waiting, unless the data is only part of a message, whose rest it then waits for. It takes little stack,
// and allocates nothing: a goroutine that waits on a stream for as long as it lasts calls Await, and RecvMsg,
// which decodes, on a goroutine that ends with the message (a goroutine keeps the stack of the deepest call
// it made, and waiting in RecvMsg takes more of it). It returns at once before CloseSend.
func (s *stream) Await() {
	if s.failed != nil || len(s.pending) > 0 || s.conn == nil {
		return
	}

	for {
		s.conn.mu.Lock()
		ready := len(s.in) > 0 || s.err != nil
		s.conn.mu.Unlock()

		if ready {
			return
		}

		// A token taken here was for data or an end that the next look sees.
		<-s.ready
	}
}

// OnReady calls f once, on a goroutine of its own, when the stream has data its caller did not read yet, or
// ended (when Await would return): at once if it already has. A caller that follows a stream for as long as
// it lasts can so hold no goroutine while it waits, and receive the message on the goroutine f runs on.
func (s *stream) OnReady(f func()) {
	if s.failed != nil || len(s.pending) > 0 || s.conn == nil {
		go f()

		return
	}

	s.notify.Store(&f)

	// Data or an end that came before f was stored signalled nobody: f is called here then, unless a signal
	// since took it.
	s.conn.mu.Lock()
	ready := len(s.in) > 0 || s.err != nil
	s.conn.mu.Unlock()

	if ready {
		s.callBack()
	}
}

// callBack calls what OnReady was given, on a goroutine of its own, unless it was called already.
func (s *stream) callBack() {
	if f := s.notify.Swap(nil); f != nil {
		go (*f)()
	}
}

// recv is RecvMsg, until the stream's end.
func (s *stream) recv(m any) error {
	c := s.conn
	if c == nil {
		return status.Error(codes.Internal, "grpc: RecvMsg before CloseSend")
	}

	if err := s.ctx.Err(); err != nil {
		s.cancel()

		return status.FromContextError(err).Err()
	}

	for {
		if len(s.pending) > 0 {
			msg, n, ok, err := s.reader.feed(s.pending)
			if s.pending = s.pending[n:]; len(s.pending) == 0 {
				s.pending = nil
			}

			if err != nil {
				c.end(s, err, true)

				return err
			}

			if ok {
				return s.decode(msg, m)
			}

			continue
		}

		c.mu.Lock()

		in, err := s.in, s.err
		s.in = nil
		s.credit += int64(len(in))

		var update int64

		if s.credit >= streamWindow/4 && err == nil {
			update, s.credit = s.credit, 0
			s.recvWindow += update
		}

		c.mu.Unlock()

		if update > 0 {
			_ = c.write(func() error { return c.fr.WriteWindowUpdate(s.id, uint32(update)) }) //nolint:gosec // At most streamWindow.
		}

		switch {
		case len(in) > 0:
			s.pending = in
		case errors.Is(err, io.EOF) && s.reader.partial():
			return status.Error(codes.Internal, "grpc: the stream ended within a message")
		case err != nil:
			return err
		default:
			<-s.ready
		}
	}
}

// decode decodes msg into m; a message that does not decode ends the stream.
func (s *stream) decode(msg []byte, m any) error {
	if err := s.codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(msg)}, m); err != nil {
		err = status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
		s.conn.end(s, err, true)

		return err
	}

	return nil
}

// headers are the request's headers: gRPC's, the metadata of the context, and the client's credentials'.
func (s *stream) headers() ([]hpack.HeaderField, error) {
	c := s.client
	scheme := "http"

	if c.opts.TLS != nil {
		scheme = "https"
	}

	// The :authority is the endpoint's, which open sets; the credentials see the first endpoint's.
	fields := []hpack.HeaderField{
		{Name: ":method", Value: "POST"},
		{Name: ":scheme", Value: scheme},
		{Name: ":path", Value: s.method},
		{Name: ":authority", Value: c.endpoints[0].Address},
		{Name: "content-type", Value: "application/grpc"},
		{Name: "user-agent", Value: c.opts.UserAgent},
		{Name: "te", Value: "trailers"},
	}

	if deadline, ok := s.ctx.Deadline(); ok {
		timeout := time.Until(deadline)
		if timeout <= 0 {
			return nil, status.Error(codes.DeadlineExceeded, context.DeadlineExceeded.Error())
		}

		fields = append(fields, hpack.HeaderField{Name: "grpc-timeout", Value: encodeTimeout(timeout)})
	}

	service := s.method
	if i := strings.LastIndexByte(service, '/'); i > 0 {
		service = service[:i]
	}

	uri := scheme + "://" + c.endpoints[0].Address + service

	for _, creds := range c.opts.Credentials {
		if creds.RequireTransportSecurity() && c.opts.TLS == nil {
			return nil, status.Error(codes.Unauthenticated, "grpc: the credentials require transport security, and the connection has none")
		}

		md, err := creds.GetRequestMetadata(s.ctx, uri)
		if err != nil {
			return nil, status.Errorf(codes.Unauthenticated, "grpc: failed to get the credentials' metadata: %v", err)
		}

		for k, v := range md {
			fields = appendMetadata(fields, strings.ToLower(k), v)
		}
	}

	md, _ := metadata.FromOutgoingContext(s.ctx)

	for k, values := range md {
		for _, v := range values {
			fields = appendMetadata(fields, strings.ToLower(k), v)
		}
	}

	return fields, nil
}

// appendMetadata appends the metadata k: v to fields, unless k is one gRPC or HTTP/2 reserves; a binary
// value is encoded.
func appendMetadata(fields []hpack.HeaderField, k, v string) []hpack.HeaderField {
	switch k {
	case "content-type", "user-agent", "te", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "host":
		return fields
	}

	if k == "" || strings.HasPrefix(k, ":") || strings.HasPrefix(k, "grpc-") {
		return fields
	}

	if strings.HasSuffix(k, "-bin") {
		v = base64.RawStdEncoding.EncodeToString([]byte(v))
	}

	return append(fields, hpack.HeaderField{Name: k, Value: v})
}

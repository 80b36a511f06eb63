package h2stream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// conn is one HTTP/2 connection and its streams. Its goroutine reads the frames the server sends, and
// queues each stream's data for the stream's caller; the callers write their own frames.
type conn struct {
	client *Client
	nc     net.Conn
	fr     *http2.Framer
	bw     *bufio.Writer
	// authority is the :authority of the connection's streams: its endpoint's address.
	authority string

	// wmu serializes the writes, and guards henc and hbuf. A goroutine that holds both locks took wmu
	// first.
	wmu  sync.Mutex
	henc *hpack.Encoder
	hbuf bytes.Buffer

	// mu guards what follows, and the streams' state.
	mu sync.Mutex
	// cond is signalled when the send windows grow, and when streams or the connection end.
	cond    sync.Cond
	streams map[uint32]*stream
	nextID  uint32
	// err is why the connection failed: nil while it works.
	err error
	// goingAway is set once the server sent a GOAWAY: the connection takes no new stream, and is closed
	// once its streams ended.
	goingAway bool
	// sendWindow is what the connection's flow control lets the client send; peerWindow, peerMaxFrame and
	// peerMaxStreams are the server's settings.
	sendWindow     int64
	peerWindow     int64
	peerMaxFrame   uint32
	peerMaxStreams uint32

	// recvWindow is what the server may still send on the connection, recvUnacked what it sent that the
	// client did not give back yet. Only the reading goroutine uses them.
	recvWindow, recvUnacked int64

	// The health check (see health.go). started is when the connection started, on the monotonic clock;
	// lastRead when its last frame was read, since started; pingFree is set once the server sent data or
	// headers since the last PING. The reading goroutine sets them, the timer's function reads them.
	started  time.Time
	lastRead atomic.Int64
	pingFree atomic.Bool
	// health is the timer, healthParked set while it is stopped for want of streams; probing is set while
	// a probe sent at probeSent waits for an answer; pings counts the probes, the PINGs' payload. Guarded
	// by mu.
	health       *time.Timer
	healthParked bool
	probing      bool
	probeSent    time.Duration
	pings        uint64
}

// The defaults of HTTP/2's settings, until the server's own arrive.
const (
	defaultWindow   = 65535
	defaultMaxFrame = 16384
	maxWindow       = math.MaxInt32
	maxStreamID     = math.MaxInt32
)

// newConn starts HTTP/2 over nc: the client's preface and settings, a larger connection window, and the
// goroutine that reads the connection.
func newConn(client *Client, nc net.Conn, authority string) (*conn, error) {
	c := &conn{
		client:         client,
		nc:             nc,
		bw:             bufio.NewWriterSize(nc, 4<<10),
		authority:      authority,
		streams:        map[uint32]*stream{},
		nextID:         1,
		sendWindow:     defaultWindow,
		peerWindow:     defaultWindow,
		peerMaxFrame:   defaultMaxFrame,
		peerMaxStreams: math.MaxUint32,
		recvWindow:     connectionWindow,
		started:        time.Now(),
	}
	c.cond.L = &c.mu
	c.fr = http2.NewFramer(c.bw, bufio.NewReaderSize(nc, 8<<10))
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.fr.MaxHeaderListSize = maxHeaderList
	c.fr.SetReuseFrames()
	c.henc = hpack.NewEncoder(&c.hbuf)

	// The timer is set before the first write, whose failure stops it, and under mu, which its function
	// takes first.
	c.mu.Lock()
	c.health = time.AfterFunc(client.opts.ReadIdle, c.checkHealth)
	c.mu.Unlock()

	err := c.write(func() error {
		if _, err := c.bw.WriteString(http2.ClientPreface); err != nil {
			return err //nolint:wrapcheck // write wraps it.
		}

		err := c.fr.WriteSettings(
			http2.Setting{ID: http2.SettingEnablePush, Val: 0},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
			http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: maxHeaderList},
		)
		if err != nil {
			return err //nolint:wrapcheck // write wraps it.
		}

		return c.fr.WriteWindowUpdate(0, connectionWindow-defaultWindow) //nolint:wrapcheck // write wraps it.
	})
	if err != nil {
		return nil, err
	}

	go c.read()

	return c, nil
}

// open reports whether c takes new streams.
func (c *conn) open() bool {
	if c == nil {
		return false
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	return c.err == nil && !c.goingAway && c.nextID <= maxStreamID
}

// write writes frames with fr, and flushes them. A write that fails fails the connection.
func (c *conn) write(frames func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()

	return c.writeLocked(frames)
}

// writeLocked is write, wmu held.
func (c *conn) writeLocked(frames func() error) error {
	// A server that stops reading must not hold the writers (and the reading goroutine, which answers
	// pings) forever: one that does not take a write within PingTimeout is as dead as one that does not
	// answer a ping.
	_ = c.nc.SetWriteDeadline(time.Now().Add(c.client.opts.PingTimeout))

	err := frames()
	if err == nil {
		err = c.bw.Flush()
	}

	if err != nil {
		err = status.Error(codes.Unavailable, "failed to write to the connection: "+err.Error())
		c.fail(err, true)
	}

	return err
}

// read reads the connection's frames until it fails.
func (c *conn) read() {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				c.reset(se.StreamID, status.Error(codes.Internal, "the server sent an invalid frame: "+se.Error()))

				continue
			}

			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}

			c.fail(status.Error(codes.Unavailable, "the connection failed: "+err.Error()), true)

			return
		}

		c.sawFrame(f)

		if err = c.handle(f); err != nil {
			c.fail(status.Error(codes.Unavailable, "the connection failed: "+err.Error()), true)

			return
		}
	}
}

// handle handles one frame; an error fails the connection.
func (c *conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.MetaHeadersFrame:
		c.onHeaders(f)
	case *http2.RSTStreamFrame:
		c.reset(f.StreamID, resetError(f.ErrCode))
	case *http2.SettingsFrame:
		return c.onSettings(f)
	case *http2.PingFrame:
		if !f.IsAck() {
			data := f.Data

			return c.write(func() error { return c.fr.WritePing(true, data) })
		}
	case *http2.GoAwayFrame:
		c.onGoAway(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.PushPromiseFrame:
		return errors.New("the server pushed a stream, though push is disabled")
	}

	return nil
}

// onData queues a stream's data for its caller, and gives the connection's window back as data arrives:
// what a stream holds is bounded by its own window, which its caller gives back as it reads.
func (c *conn) onData(f *http2.DataFrame) error {
	n := int64(f.Length)

	c.recvWindow -= n
	if c.recvWindow < 0 {
		return errors.New("the server overflowed the connection's flow-control window")
	}

	if c.recvUnacked += n; c.recvUnacked >= connectionWindow/4 {
		inc := c.recvUnacked
		c.recvUnacked, c.recvWindow = 0, c.recvWindow+inc

		if err := c.write(func() error { return c.fr.WriteWindowUpdate(0, uint32(inc)) }); err != nil { //nolint:gosec // At most connectionWindow.
			return err
		}
	}

	c.mu.Lock()

	s := c.streams[f.StreamID]

	var err error

	switch {
	case s == nil:
		// A stream that ended (its caller canceled it): its data is dropped.
	case !s.gotHeaders:
		err = status.Error(codes.Internal, "the server sent data before headers")
	case s.recvWindow < n:
		err = status.Error(codes.Internal, "the server overflowed the stream's flow-control window")
	default:
		data := f.Data()
		s.recvWindow -= n
		s.in = append(s.in, data...)
		// The padding is never read: it is given back with what the caller reads.
		s.credit += n - int64(len(data))

		if f.StreamEnded() {
			err = status.Error(codes.Internal, "the server ended the stream without trailers")
		}
	}

	c.mu.Unlock()

	switch {
	case err != nil:
		c.end(s, err, !f.StreamEnded())
	case s != nil:
		s.signal()
	}

	return nil
}

// onHeaders handles a stream's response headers, or its trailers.
func (c *conn) onHeaders(f *http2.MetaHeadersFrame) {
	c.mu.Lock()

	s := c.streams[f.StreamID]
	if s == nil {
		c.mu.Unlock()

		return
	}

	trailers := s.gotHeaders
	s.gotHeaders = true

	c.mu.Unlock()

	switch {
	case f.Truncated:
		c.end(s, status.Error(codes.Internal, "the server's headers are larger than the limit"), !f.StreamEnded())
	case !trailers && f.StreamEnded():
		c.end(s, trailerError(f.Fields, true), false)
	case !trailers:
		if err := responseError(f.Fields); err != nil {
			c.end(s, err, true)
		}
	case !f.StreamEnded():
		c.end(s, status.Error(codes.Internal, "the server sent trailers that do not end the stream"), true)
	default:
		c.end(s, trailerError(f.Fields, false), false)
	}
}

// reset ends the stream id, which the server reset or sent an invalid frame on, with err.
func (c *conn) reset(id uint32, err error) {
	c.mu.Lock()
	s := c.streams[id]
	c.mu.Unlock()

	c.end(s, err, status.Code(err) == codes.Internal)
}

// onSettings applies the server's settings, and acknowledges them.
func (c *conn) onSettings(f *http2.SettingsFrame) error {
	if f.IsAck() {
		return nil
	}

	if err := f.ForeachSetting(func(s http2.Setting) error { return s.Valid() }); err != nil {
		return err //nolint:wrapcheck // read wraps it.
	}

	var tableSize uint32 = math.MaxUint32

	c.mu.Lock()

	_ = f.ForeachSetting(func(s http2.Setting) error {
		switch s.ID { //nolint:exhaustive // The others change nothing for a client that does not push.
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - c.peerWindow
			c.peerWindow = int64(s.Val)

			for _, st := range c.streams {
				st.sendWindow += delta
			}
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		case http2.SettingMaxConcurrentStreams:
			c.peerMaxStreams = s.Val
		case http2.SettingHeaderTableSize:
			tableSize = s.Val
		}

		return nil
	})

	c.cond.Broadcast()
	c.mu.Unlock()

	return c.write(func() error {
		if tableSize != math.MaxUint32 {
			c.henc.SetMaxDynamicTableSizeLimit(tableSize)
		}

		return c.fr.WriteSettingsAck()
	})
}

// onGoAway fails the streams the server will not answer, and takes no new stream: they go to another
// connection. The connection is closed once its last stream ended.
func (c *conn) onGoAway(f *http2.GoAwayFrame) {
	err := status.Error(codes.Unavailable, "the server is going away: "+f.ErrCode.String())

	c.mu.Lock()

	c.goingAway = true

	var refused []*stream

	for id, s := range c.streams {
		if id > f.LastStreamID {
			refused = append(refused, s)
		}
	}

	drained := len(refused) == len(c.streams)

	c.mu.Unlock()

	for _, s := range refused {
		c.end(s, err, false)
	}

	if drained {
		c.fail(status.Error(codes.Unavailable, "the server closed the connection"), false)
	}
}

// onWindowUpdate grows a send window.
func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	c.mu.Lock()
	defer c.mu.Unlock()

	if f.StreamID == 0 {
		if c.sendWindow += int64(f.Increment); c.sendWindow > maxWindow {
			return errors.New("the server overflowed the connection's send window")
		}
	} else if s := c.streams[f.StreamID]; s != nil {
		s.sendWindow += int64(f.Increment)
	}

	c.cond.Broadcast()

	return nil
}

// end ends s with err (nil: the stream ended with an OK status), and resets it when the server may still
// send on it. A stream that ended already stays as it ended.
func (c *conn) end(s *stream, err error, reset bool) {
	if s == nil {
		return
	}

	if err == nil {
		err = io.EOF
	}

	c.mu.Lock()

	if c.streams[s.id] != s {
		c.mu.Unlock()

		return
	}

	delete(c.streams, s.id)
	s.err = err
	stop := s.stop
	drained := c.goingAway && len(c.streams) == 0

	c.cond.Broadcast()
	c.mu.Unlock()

	if reset {
		_ = c.write(func() error { return c.fr.WriteRSTStream(s.id, http2.ErrCodeCancel) })
	}

	stop()
	s.signal()

	if drained {
		c.fail(status.Error(codes.Unavailable, "the server closed the connection"), false)
	}
}

// fail closes the connection, and ends its streams with err. A failure is reported to the client's
// OnConnection when report is set and the server did not send a GOAWAY before.
func (c *conn) fail(err error, report bool) {
	c.mu.Lock()

	if c.err != nil {
		c.mu.Unlock()

		return
	}

	c.err = err
	report = report && !c.goingAway
	streams := c.streams
	c.health.Stop()
	c.streams = nil
	c.mu.Unlock()

	_ = c.nc.Close()

	// The client hears of the failure before the streams' callers do: a caller that looks at its stream
	// (after an earlier signal, say) sees its error only once it is set, after this.
	if report && c.client.opts.OnConnection != nil {
		c.client.opts.OnConnection(err, time.Now())
	}

	stops := make([]func() bool, 0, len(streams))

	c.mu.Lock()

	for _, s := range streams {
		s.err = err
		stops = append(stops, s.stop)
	}

	c.cond.Broadcast()
	c.mu.Unlock()

	for _, stop := range stops {
		stop()
	}

	for _, s := range streams {
		s.signal()
	}
}

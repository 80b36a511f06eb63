package h2stream

import (
	"encoding/binary"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A connection that dies silently (its server's host vanished, a NAT or a load balancer dropped the flow,
// the network is partitioned) sends no frame and no error: its streams would wait forever. So each
// connection has a health check, one timer that needs no goroutine until it fires: once no frame was read
// for ReadIdle while the connection carries streams, it sends a probe; once no frame at all arrived within
// PingTimeout after the probe, it fails the connection, as the kubelet's HTTP/2 client (x/net's
// ReadIdleTimeout) does with its pings. Any frame counts as life, the probe's answer as any other. The
// reading goroutine only notes when it read a frame: rather than being reset on every frame, the timer
// fires once per ReadIdle on a busy connection, and is set again for when the silence would be due. It is
// stopped while the connection has no stream (nobody waits on it then), and when the connection fails.
//
// The probe is a PING only when the server will not hold it against the client: gRPC's servers (grpc-go,
// which Talos's apid is, and grpc-java and gRPC's C core) count a PING that comes less than 5 minutes
// after the last one (their keepalive policy's default) as a strike, unless they sent data or headers in
// between, and close the connection with a GOAWAY "too_many_pings" at the third strike: a PING every 30
// seconds on idle watches would lose the connection every two minutes. Otherwise the probe is an empty
// SETTINGS frame, which a server must acknowledge at once (RFC 9113, section 6.5.3) and which no
// keepalive policy counts.

// healthAction is what the health check does when its timer fires.
type healthAction int

const (
	// healthWait waits, nothing outstanding: the connection read a frame less than ReadIdle ago.
	healthWait healthAction = iota
	// healthAwait waits for the answer to the probe sent.
	healthAwait
	// healthProbe sends a probe.
	healthProbe
	// healthFail fails the connection: the server did not answer the probe.
	healthFail
	// healthPark stops the timer, until a stream opens: a connection without streams has nothing to check
	// for anyone.
	healthPark
)

// healthInput is what the health check decides from; the times are durations since the connection
// started, on the monotonic clock.
type healthInput struct {
	now, lastRead time.Duration
	// probeSent is when the probe was sent, when probing.
	probeSent time.Duration
	probing   bool
	// streams is set while the connection carries streams.
	streams bool

	readIdle, pingTimeout time.Duration
}

// decideHealth decides what the health check does, and when the timer fires next.
func decideHealth(in healthInput) (healthAction, time.Duration) {
	// A frame read at the very moment the probe was sent counts as its answer: it says the connection
	// lives as well.
	if in.probing && in.lastRead < in.probeSent {
		if waited := in.now - in.probeSent; waited < in.pingTimeout {
			return healthAwait, in.pingTimeout - waited
		}

		return healthFail, 0
	}

	if !in.streams {
		return healthPark, 0
	}

	if idle := in.now - in.lastRead; idle < in.readIdle {
		return healthWait, in.readIdle - idle
	}

	return healthProbe, in.pingTimeout
}

// sinceStart is the time since the connection started, on the monotonic clock.
func (c *conn) sinceStart() time.Duration {
	return time.Since(c.started)
}

// checkHealth runs when the health check's timer fires: it decides, arms the timer again, and sends the
// probe or fails the connection.
func (c *conn) checkHealth() {
	opts := &c.client.opts
	now := c.sinceStart()

	c.mu.Lock()

	if c.err != nil {
		c.mu.Unlock()

		return
	}

	action, next := decideHealth(healthInput{
		now:         now,
		lastRead:    time.Duration(c.lastRead.Load()),
		probeSent:   c.probeSent,
		probing:     c.probing,
		streams:     len(c.streams) > 0,
		readIdle:    opts.ReadIdle,
		pingTimeout: opts.PingTimeout,
	})

	c.probing = action == healthProbe || action == healthAwait

	switch action {
	case healthProbe:
		c.probeSent = now
		c.pings++
	case healthPark:
		c.healthParked = true
	case healthWait, healthAwait, healthFail:
	}

	// The timer is armed again under mu, which fail takes to stop it: a connection that failed never
	// keeps a timer.
	if action != healthPark && action != healthFail {
		c.health.Reset(next)
	}

	pings := c.pings

	c.mu.Unlock()

	switch action {
	case healthFail:
		c.fail(status.Errorf(codes.Unavailable, "the connection failed: the server sent nothing within %s of a health check", opts.PingTimeout), true)
	case healthProbe:
		// A write the server does not take within PingTimeout fails the connection, as a probe it does not
		// answer does.
		_ = c.write(func() error {
			if !c.pingFree.Swap(false) {
				return c.fr.WriteSettings() //nolint:wrapcheck // write wraps it.
			}

			var data [8]byte

			binary.BigEndian.PutUint64(data[:], pings)

			return c.fr.WritePing(false, data) //nolint:wrapcheck // write wraps it.
		})
	case healthWait, healthAwait, healthPark:
	}
}

// unpark arms the health check again when a stream opens on a connection that had none. mu is held.
func (c *conn) unpark() {
	if c.healthParked {
		c.healthParked = false
		c.health.Reset(c.client.opts.ReadIdle)
	}
}

// sawFrame records that the connection read f: the health check counts any frame as life, and a PING
// after the server's data or headers as no strike against the client.
func (c *conn) sawFrame(f http2.Frame) {
	c.lastRead.Store(int64(c.sinceStart()))

	switch f.(type) {
	case *http2.DataFrame, *http2.MetaHeadersFrame:
		c.pingFree.Store(true)
	}
}

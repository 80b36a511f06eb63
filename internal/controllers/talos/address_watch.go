package talos

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	netpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/network"
	"google.golang.org/grpc"

	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// addressEvent is one event of a machine's address watch.
type addressEvent struct {
	typ v1alpha1.EventType
	// id is the AddressStatus's ID (Created, Updated, Destroyed).
	id string
	// address is the AddressStatus (Created, Updated).
	address addressStatus
}

// addressWatch follows a machine's AddressStatuses over one watch stream: its contents first, then every
// change. A stream that breaks (the machine or the endpoint did not answer for a while) is resumed from the
// last event taken, after a backoff, and says nothing of it: a watch does not tell when a machine stops
// answering; the probes of NotReady Nodes do. A stream that cannot resume (the machine rebooted) fails.
type addressWatch struct {
	api    talosAPI
	stream v1alpha1.State_WatchClient
	// received is the message wait received, over a stream that cannot be awaited, until take takes it.
	received *receivedMessage
	// bookmark names the last event taken, nil before the first one that carries one.
	bookmark []byte
	// retryMin and retryMax bound the backoff between attempts to resume.
	retryMin, retryMax time.Duration
}

// openAddressWatch opens the watch of the machine ctx addresses.
func openAddressWatch(ctx context.Context, api talosAPI, retryMin, retryMax time.Duration) (*addressWatch, error) {
	stream, err := api.watchKind(ctx, addressStatusKind, nil)
	if err != nil {
		return nil, err
	}

	return &addressWatch{api: api, stream: stream, retryMin: retryMin, retryMax: retryMax}, nil
}

// next waits for the next message of the watch and returns its events; it fails when ctx ends or the
// watch cannot go on.
func (w *addressWatch) next(ctx context.Context) ([]addressEvent, error) {
	msg, err := w.receive()

	return w.events(ctx, msg, err)
}

// awaitable is a stream whose next message can be waited for apart from receiving it: h2stream's.
type awaitable interface{ Await() }

// parkable is a stream that calls back when its next message comes: h2stream's.
type parkable interface{ OnReady(f func()) }

// parkable returns the watch's stream when it calls back when its next message comes.
func (w *addressWatch) parkable() (parkable, bool) {
	if g, ok := w.stream.(*grpc.GenericClientStream[v1alpha1.WatchRequest, v1alpha1.WatchResponse]); ok {
		p, ok := g.ClientStream.(parkable)

		return p, ok
	}

	return nil, false
}

// receivedMessage is a message of the watch received by wait, which take returns.
type receivedMessage struct {
	frame watchFrame
	err   error
}

// wait waits for the watch's next message, on the goroutine that waits on the watch for as long as its
// session lasts: over a stream that can be awaited, it only waits for the message's data, which take then
// receives on the goroutine that handles the message (see offStack): receiving it takes more stack than
// waiting for it (a goroutine keeps the stack of the deepest call it made). Over another stream (a host's
// gRPC connection), it receives the message, and keeps it for take, which would otherwise wait on a second
// goroutine.
func (w *addressWatch) wait() {
	if g, ok := w.stream.(*grpc.GenericClientStream[v1alpha1.WatchRequest, v1alpha1.WatchResponse]); ok {
		if a, ok := g.ClientStream.(awaitable); ok {
			a.Await()

			return
		}
	}

	frame, err := w.receive()
	w.received = &receivedMessage{frame: frame, err: err}
}

// take returns the message wait waited for, received if it was not.
func (w *addressWatch) take() (watchFrame, error) {
	if m := w.received; m != nil {
		w.received = nil

		return m.frame, m.err
	}

	return w.receive()
}

// receive waits for the next message of the stream, and does nothing else, not even decode it.
func (w *addressWatch) receive() (watchFrame, error) {
	var frame watchFrame

	err := w.stream.RecvMsg(&frame)

	return frame, err //nolint:wrapcheck // events reads the stream's error.
}

// events returns the events of frame, the watch's next message, or of the first message of the watch
// resumed when receiving failed with err; it fails when ctx ends or the watch cannot go on.
func (w *addressWatch) events(ctx context.Context, frame watchFrame, err error) ([]addressEvent, error) {
	var msg *v1alpha1.WatchResponse

	if err == nil {
		msg, err = frame.decode()
		if err != nil {
			return nil, err
		}
	} else if msg, err = w.resume(ctx, err); err != nil {
		return nil, err
	}

	events := make([]addressEvent, 0, len(msg.GetEvent()))

	for _, ev := range msg.GetEvent() {
		if ev.Bookmark != nil {
			w.bookmark = ev.Bookmark
		}

		out := addressEvent{typ: ev.GetEventType(), id: ev.GetResource().GetMetadata().GetId()}

		switch ev.GetEventType() {
		case v1alpha1.EventType_CREATED, v1alpha1.EventType_UPDATED:
			var spec netpb.AddressStatusSpec
			if err = decodeSpec(ev.GetResource(), addressStatusKind, &spec); err != nil {
				return nil, err
			}

			out.address = addressFromSpec(&spec)
		case v1alpha1.EventType_ERRORED:
			return nil, fmt.Errorf("address watch failed: %s", ev.GetError())
		case v1alpha1.EventType_DESTROYED, v1alpha1.EventType_BOOTSTRAPPED, v1alpha1.EventType_NOOP:
		}

		events = append(events, out)
	}

	return events, nil
}

// resume opens the watch again from its bookmark after it failed with err, and returns its first message.
// A watch without a bookmark, or whose bookmark the machine refuses, fails.
func (w *addressWatch) resume(ctx context.Context, err error) (*v1alpha1.WatchResponse, error) {
	backoff := newRetryBackoff(w.retryMin, w.retryMax)

	for {
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case w.bookmark == nil:
			return nil, fmt.Errorf("address watch failed: %w", err)
		case isInvalidBookmark(err):
			return nil, fmt.Errorf("address watch failed: %w: %w", errInvalidBookmark, err)
		}

		if !backoff.wait(ctx) {
			return nil, ctx.Err()
		}

		var stream v1alpha1.State_WatchClient

		if stream, err = w.api.watchKind(ctx, addressStatusKind, w.bookmark); err != nil {
			continue
		}

		w.stream = stream

		var msg *v1alpha1.WatchResponse

		if msg, err = stream.Recv(); err == nil {
			return msg, nil
		}
	}
}

// addressStatus is what a session keeps of one of its machine's AddressStatuses: a copy of the fields the
// facts read, not the decoded message (thousands of sessions each holding every message of their machine
// would cost more memory than the machines' facts themselves).
type addressStatus struct {
	prefix netip.Prefix
	link   string
	scope  uint8
	family uint8
	flags  uint32
}

// addressFromSpec converts a Talos AddressStatus; an address that does not decode is left invalid (and
// out of the facts, with a warning).
func addressFromSpec(spec *netpb.AddressStatusSpec) addressStatus {
	out := addressStatus{
		// Link names repeat from machine to machine ("eth0", "ens5"): every session holds the shared copy.
		link:   sharedstrings.Share(spec.GetLinkName()),
		scope:  uint8(spec.GetScope()),  //nolint:gosec // Talos's scopes are a byte.
		family: uint8(spec.GetFamily()), //nolint:gosec // Talos's families are a byte.
		flags:  spec.GetFlags(),
	}

	var addr netip.Addr

	if p := spec.GetAddress(); p != nil && addr.UnmarshalBinary(p.GetIp()) == nil {
		out.prefix = netip.PrefixFrom(addr, int(p.GetPrefixLength()))
	}

	return out
}

package ccm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/kubeclient"
)

// APIServerState is what the pipeline's requests met at the cluster's apiserver lately: whether it refuses
// the credentials, and whether it can be reached at all.
type APIServerState struct {
	// RefusedSince is when the apiserver began refusing the pipeline's credentials (401 Unauthorized, or 403
	// Forbidden), and Refused is what it said the last time (its message: no credentials); both are zero
	// once it accepts the requests it refused.
	RefusedSince time.Time
	Refused      string
	// UnreachableSince is when the pipeline's requests began failing to reach the apiserver (connection
	// refused, timeouts, names that do not resolve), and Unreachable is the last failure; both are zero
	// once the apiserver answers again, whatever it answers.
	UnreachableSince time.Time
	Unreachable      string
}

// APIServer reports whether the cluster's apiserver refuses the pipeline's credentials, or cannot be
// reached, and since when. Options.CredentialsChanged, if set, is called when either begins or ends.
func (c *CCM) APIServer() APIServerState {
	return c.conns.health.current()
}

// maxForbiddenRequests bounds the refused requests remembered: a 403 answer is cleared by an accepted
// request of the same method and path (an RBAC rule missing for one resource leaves the others working), so
// that the state does not flap while the others succeed. Beyond the bound, a new refusal is reported but not
// remembered.
const maxForbiddenRequests = 64

// forbiddenExpiry is how long a 403 answer not repeated holds the state while other requests are accepted:
// a write refused once, for an object since gone, is not held for ever, while a list or watch refused
// again at every retry (client-go retries them within a minute) is.
const forbiddenExpiry = 5 * time.Minute

// maxReasonLen bounds the reasons kept (an apiserver's message, a connection's error).
const maxReasonLen = 512

// maxRefusalBody bounds the part of a refusal's body read for the apiserver's message.
const maxRefusalBody = 8 << 10

// apiServerHealth follows the apiserver's answers to every request of a pipeline's clients (its
// rotatingTransports): the refusals of the credentials, and the failures to reach it.
type apiServerHealth struct {
	// changed, if set, is called when a refusal or unreachability begins or ends. Set before any request.
	changed func()
	// abnormal is set while something is refused or unreachable: an accepted request then takes mu, to
	// clear it; otherwise it takes nothing.
	abnormal atomic.Bool

	// now is the clock.
	now func() time.Time

	mu sync.Mutex
	// unauthorized: a 401 answer since the last accepted request, of any kind. forbidden: the requests
	// (method and path) answered 403 since they were last accepted, with the time of the last refusal.
	unauthorized bool
	forbidden    map[string]time.Time
	state        APIServerState
}

func newAPIServerHealth() *apiServerHealth {
	return &apiServerHealth{now: time.Now, forbidden: map[string]time.Time{}}
}

// current returns the state.
func (h *apiServerHealth) current() APIServerState {
	h.mu.Lock()
	defer h.mu.Unlock()

	return h.state
}

// answered records the apiserver's answer to req. It reads the body of a refusal for its message, and
// leaves it to be read again.
func (h *apiServerHealth) answered(req *http.Request, resp *http.Response) {
	refused := resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden
	if !refused && !h.abnormal.Load() {
		return
	}

	var reason string
	if refused {
		reason = refusalReason(resp)
	}

	key := req.Method + " " + req.URL.Path
	now := h.now()

	h.mu.Lock()
	before := h.state

	h.state.UnreachableSince, h.state.Unreachable = time.Time{}, ""

	switch resp.StatusCode {
	case http.StatusUnauthorized:
		h.unauthorized = true
	case http.StatusForbidden:
		// Authenticated: the credentials are good, this request is not allowed.
		h.unauthorized = false

		if _, ok := h.forbidden[key]; ok || len(h.forbidden) < maxForbiddenRequests {
			h.forbidden[key] = now
		}
	default:
		h.unauthorized = false
		delete(h.forbidden, key)

		for other, at := range h.forbidden {
			if now.Sub(at) > forbiddenExpiry {
				delete(h.forbidden, other)
			}
		}
	}

	switch {
	case refused:
		if h.state.RefusedSince.IsZero() {
			h.state.RefusedSince = now
		}

		h.state.Refused = reason
	case !h.unauthorized && len(h.forbidden) == 0:
		h.state.RefusedSince, h.state.Refused = time.Time{}, ""
	}

	after := h.state
	h.abnormal.Store(!after.RefusedSince.IsZero())
	h.mu.Unlock()

	h.notifyIf(before, after)
}

// failed records a request that got no answer. Only failures to reach the apiserver count: a request
// canceled by its caller, or sent over connections the pipeline closed, says nothing about the apiserver.
func (h *apiServerHealth) failed(err error) {
	if !unreachable(err) {
		return
	}

	h.mu.Lock()
	before := h.state

	if h.state.UnreachableSince.IsZero() {
		h.state.UnreachableSince = h.now()
	}

	h.state.Unreachable = truncate(err.Error())
	after := h.state
	h.abnormal.Store(true)
	h.mu.Unlock()

	h.notifyIf(before, after)
}

// rotated forgets the refusals of the credentials just replaced. The state stays as it is until the new
// ones are answered: accepted, it clears; refused too, it goes on since the first refusal, so that a
// provider that keeps returning credentials the apiserver refuses is seen refused since the first.
func (h *apiServerHealth) rotated() {
	h.mu.Lock()
	defer h.mu.Unlock()

	h.unauthorized = false
	clear(h.forbidden)
}

// notifyIf calls changed when a refusal or unreachability began or ended between before and after: a new
// reason alone is read at the next status, not announced.
func (h *apiServerHealth) notifyIf(before, after APIServerState) {
	if h.changed == nil {
		return
	}

	if before.RefusedSince.IsZero() != after.RefusedSince.IsZero() || before.UnreachableSince.IsZero() != after.UnreachableSince.IsZero() {
		h.changed()
	}
}

// unreachable reports whether err, a request's failure, says that the apiserver cannot be reached: it cannot
// be dialled, its name does not resolve, or it did not answer in time.
func unreachable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errConnectionsClosed) {
		// The caller gave up, or the pipeline closed the connections: the apiserver may be fine.
		return false
	}

	var (
		dnsErr *net.DNSError
		opErr  *net.OpError
		netErr net.Error
	)

	switch {
	case errors.As(err, &dnsErr):
		return true
	case errors.As(err, &opErr) && opErr.Op == "dial":
		return true
	case errors.As(err, &netErr) && netErr.Timeout():
		return true
	default:
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, syscall.EHOSTUNREACH) || errors.Is(err, syscall.ENETUNREACH)
	}
}

// refusalReason is the apiserver's message in a refusal (a Status, in JSON or protobuf), after its HTTP
// status; the body is left to be read again.
func refusalReason(resp *http.Response) string {
	reason := resp.Status
	if resp.Body == nil {
		return reason
	}

	body, err := io.ReadAll(io.LimitReader(resp.Body, maxRefusalBody))
	resp.Body = readCloser{Reader: io.MultiReader(bytes.NewReader(body), resp.Body), Closer: resp.Body}

	if err != nil {
		return reason
	}

	status := &metav1.Status{}
	if _, _, err = kubeclient.Codecs.UniversalDeserializer().Decode(body, nil, status); err == nil && status.Message != "" &&
		status.Message != http.StatusText(resp.StatusCode) {
		reason += ": " + status.Message
	}

	return truncate(reason)
}

// readCloser reads from one reader and closes another.
type readCloser struct {
	io.Reader
	io.Closer
}

// truncate bounds s to maxReasonLen bytes, cut at a rune's start.
func truncate(s string) string {
	if len(s) <= maxReasonLen {
		return s
	}

	cut := maxReasonLen
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}

	return s[:cut] + "..."
}

package cosistate

import (
	"context"
	"sync/atomic"

	"github.com/cosi-project/runtime/pkg/state"
)

// watchRedirect is what a prefixed view asks of the state under it for one of its watches: to send the
// watch's events, translated, to the channel of the view's caller instead of the channel the view passed,
// so that the view needs no goroutine to forward them. state.CoreState has no room for it, so it travels
// in the context of the watch call, through whatever passes the call on unchanged (state.WrapCore,
// namespaced.State, ReleasableNamespaces). MemoryStateBuilder's namespaces take it up (see takeRedirect);
// any other state (the COSI runtime's in-memory one, a host's database-backed ones) ignores it, and the
// view forwards the events of its watches of those as it always did.
type watchRedirect struct {
	// via is the channel the view passed to the watch of the state under it (a chan<- state.Event or a
	// chan<- []state.Event). A state takes the redirect only if its own watch call got that very channel:
	// a state in between that watched with a channel of its own, to change the events on their way, would
	// otherwise be bypassed. Once the redirect is taken nobody reads via: a state in between that passes
	// the channel on must not send to it itself (to fail a watch, say); one that does relays the watch
	// through a channel of its own instead.
	via any
	// to is the channel the events go to instead, of via's type.
	to any
	// translate turns an event of the state into the one the view's caller gets.
	translate func(state.Event) state.Event
	taken     atomic.Bool
}

// watchRedirectKey is the context key of a watch call's watchRedirect.
type watchRedirectKey struct{}

// withRedirect returns ctx carrying the redirect of a view's watch whose events pass through via, and go
// to to translated. It replaces any redirect ctx carried: that of a view above (a view of a view, if
// there were one) is not taken, and that view forwards the events itself.
func withRedirect[T any](ctx context.Context, via, to chan<- T, translate func(state.Event) state.Event) (context.Context, *watchRedirect) {
	r := &watchRedirect{via: via, to: to, translate: translate}

	return context.WithValue(ctx, watchRedirectKey{}, r), r
}

// takeRedirect returns the channel a state's watch on ch sends its events to, and the translation it
// applies to them as it sends them: ch and none, unless ctx carries the redirect of a view's watch that
// passes through ch, which it then takes. It is called once the watch is sure to start.
func takeRedirect[T any](ctx context.Context, ch chan<- T) (chan<- T, func(state.Event) state.Event) {
	r, ok := ctx.Value(watchRedirectKey{}).(*watchRedirect)
	if !ok || r.via != any(ch) {
		return ch, nil
	}

	to, ok := r.to.(chan<- T)
	if !ok {
		// withRedirect gives to the type of via, which is ch's.
		return ch, nil
	}

	r.taken.Store(true)

	return to, r.translate
}

// isTaken says whether a state took the redirect: the view then forwards nothing of the watch.
func (r *watchRedirect) isTaken() bool {
	return r.taken.Load()
}

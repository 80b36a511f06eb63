package cosistate

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/siderolabs/gen/channel"
)

// NewPrefixedState returns a view of the host's state in which talos-ccm's namespaces ("talos", "node",
// "meta", ... see PrefixedNamespaces) are stored under prefix: the view reads and writes the namespace N as
// prefix+N in host, and every resource, event and conflict it returns names N again. A namespace outside
// talos-ccm's list is refused with ErrNamespaceOutsideView, so that the view never reaches the host's own
// resources or those of another prefix.
//
// This is how New runs talos-ccm for several clusters over one host state: the generic controllers address
// each resource type in its definition's default namespace, and the view moves that namespace per
// cluster. Options (owners, label and ID queries, bookmarks, tail events, unmarshal options) pass through
// unchanged, so the host's state enforces owners, versions, phases and finalizers as it does for its own
// resources. Every resource crosses the view as a copy: a written one whole, a read one with the host's spec
// (what is read is never changed).
func NewPrefixedState(host state.CoreState, prefix string) (state.State, error) {
	if host == nil {
		return nil, errors.New("failed to create a prefixed state: no host state")
	}

	if prefix == "" {
		return nil, errors.New("failed to create a prefixed state: empty prefix")
	}

	if err := ValidateNamespacePrefix(prefix); err != nil {
		return nil, fmt.Errorf("failed to create a prefixed state: %w", err)
	}

	namespaces, err := PrefixedNamespaces(prefix)
	if err != nil {
		return nil, fmt.Errorf("failed to create a prefixed state: %w", err)
	}

	view := &prefixedState{host: host, prefix: prefix, namespaces: map[resource.Namespace]bool{}}

	for _, ns := range namespaces {
		view.namespaces[ns.Namespace] = true
	}

	return state.WrapCore(view), nil
}

// prefixedState is the view NewPrefixedState returns, before state.WrapCore adds what every state has
// (teardown, finalizers, modify) on top of these calls.
type prefixedState struct {
	host   state.CoreState
	prefix string
	// namespaces are the namespaces of the view, without the prefix.
	namespaces map[resource.Namespace]bool

	// forwarders are the forwarders of the view's watches, by the channel they send to (a chan<- T to a
	// *forwarder[T]).
	forwardersMu sync.Mutex
	forwarders   map[any]any
}

// Get implements state.CoreState.
func (st *prefixedState) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) { //nolint:ireturn
	hostPtr, err := st.hostRef(ptr, ptr.ID())
	if err != nil {
		return nil, fmt.Errorf("failed to get %s: %w", pointerString(ptr), err)
	}

	r, err := st.host.Get(ctx, hostPtr, opts...)
	if err != nil {
		return nil, st.viewError(err)
	}

	return st.viewResource(r)
}

// List implements state.CoreState.
func (st *prefixedState) List(ctx context.Context, kind resource.Kind, opts ...state.ListOption) (resource.List, error) {
	hostKind, err := st.hostRef(kind, "")
	if err != nil {
		return resource.List{}, fmt.Errorf("failed to list %s: %w", kind.Type(), err)
	}

	list, err := st.host.List(ctx, hostKind, opts...)
	if err != nil {
		return resource.List{}, st.viewError(err)
	}

	out := resource.List{Items: make([]resource.Resource, 0, len(list.Items))}

	for _, r := range list.Items {
		viewed, err := st.viewResource(r)
		if err != nil {
			return resource.List{}, err
		}

		out.Items = append(out.Items, viewed)
	}

	return out, nil
}

// Create implements state.CoreState. As the host's state may, it updates r's metadata with what the state
// set (version, owner, created).
func (st *prefixedState) Create(ctx context.Context, r resource.Resource, opts ...state.CreateOption) error {
	hostRes, err := st.hostResource(r)
	if err != nil {
		return fmt.Errorf("failed to create %s: %w", resource.String(r), err)
	}

	if err = st.host.Create(ctx, hostRes, opts...); err != nil {
		return st.viewError(err)
	}

	*r.Metadata() = withNamespace(hostRes.Metadata(), r.Metadata().Namespace())

	return nil
}

// Update implements state.CoreState. As the host's state may, it updates r's metadata with what the state
// set (version, updated).
func (st *prefixedState) Update(ctx context.Context, r resource.Resource, opts ...state.UpdateOption) error {
	hostRes, err := st.hostResource(r)
	if err != nil {
		return fmt.Errorf("failed to update %s: %w", resource.String(r), err)
	}

	if err = st.host.Update(ctx, hostRes, opts...); err != nil {
		return st.viewError(err)
	}

	*r.Metadata() = withNamespace(hostRes.Metadata(), r.Metadata().Namespace())

	return nil
}

// Destroy implements state.CoreState.
func (st *prefixedState) Destroy(ctx context.Context, ptr resource.Pointer, opts ...state.DestroyOption) error {
	hostPtr, err := st.hostRef(ptr, ptr.ID())
	if err != nil {
		return fmt.Errorf("failed to destroy %s: %w", pointerString(ptr), err)
	}

	if err = st.host.Destroy(ctx, hostPtr, opts...); err != nil {
		return st.viewError(err)
	}

	return nil
}

// Watch implements state.CoreState.
func (st *prefixedState) Watch(ctx context.Context, ptr resource.Pointer, ch chan<- state.Event, opts ...state.WatchOption) error {
	hostPtr, err := st.hostRef(ptr, ptr.ID())
	if err != nil {
		return fmt.Errorf("failed to watch %s: %w", pointerString(ptr), err)
	}

	return forwardWatch(ctx, st, ch, st.viewEvent, func(ctx context.Context, in chan<- state.Event) error {
		return st.host.Watch(ctx, hostPtr, in, opts...)
	})
}

// WatchKind implements state.CoreState.
func (st *prefixedState) WatchKind(ctx context.Context, kind resource.Kind, ch chan<- state.Event, opts ...state.WatchKindOption) error {
	hostKind, err := st.hostRef(kind, "")
	if err != nil {
		return fmt.Errorf("failed to watch %s: %w", kind.Type(), err)
	}

	return forwardWatch(ctx, st, ch, st.viewEvent, func(ctx context.Context, in chan<- state.Event) error {
		return st.host.WatchKind(ctx, hostKind, in, opts...)
	})
}

// WatchKindAggregated implements state.CoreState.
func (st *prefixedState) WatchKindAggregated(ctx context.Context, kind resource.Kind, ch chan<- []state.Event, opts ...state.WatchKindOption) error {
	hostKind, err := st.hostRef(kind, "")
	if err != nil {
		return fmt.Errorf("failed to watch %s: %w", kind.Type(), err)
	}

	viewEvents := func(events []state.Event) []state.Event {
		out := make([]state.Event, len(events))

		for i, e := range events {
			out[i] = st.viewEvent(e)
		}

		return out
	}

	return forwardWatch(ctx, st, ch, viewEvents, func(ctx context.Context, in chan<- []state.Event) error {
		return st.host.WatchKindAggregated(ctx, hostKind, in, opts...)
	})
}

// forwardWatch starts a watch of the host's state whose events the view hands on to out, translated, until
// ctx is done. A state that can send them to out itself, translated (MemoryStateBuilder's namespaces,
// through whatever passes the call on to them), takes the watch's redirect (see watchRedirect), and the
// view runs nothing for the watch. Otherwise a forwarder does it: every watch of the view on the same channel shares one, one goroutine
// (the controller runtime watches each of the dozen or so types of a pipeline on one channel, and a
// goroutine per watch would be a dozen per cluster of a host's), which ends with the last of its watches.
// The forwarder starts once the host's watch call returned without taking the redirect: a state that sent
// its first events meanwhile, from a goroutine of its own, waits for it that long.
func forwardWatch[T any](ctx context.Context, st *prefixedState, out chan<- T, translate func(T) T, start func(context.Context, chan<- T) error) error {
	fw := acquireForwarder(st, out)
	in := chan<- T(fw.in)
	watchCtx, redirect := withRedirect(ctx, in, out, st.viewEvent)

	if err := start(watchCtx, in); err != nil {
		fw.release()

		return err
	}

	if redirect.isTaken() {
		fw.release()

		return nil
	}

	fw.start(translate)
	context.AfterFunc(ctx, fw.release)

	return nil
}

// forwarder hands the events of a view's watches on one channel, out, to that channel, translated.
type forwarder[T any] struct {
	view *prefixedState
	out  chan<- T
	// in is the channel of the host's watches.
	in chan T
	// watches counts the watches that send to in, or may (guarded by view.forwardersMu); stop, set once
	// the forwarder's goroutine runs, ends it once none is left.
	watches int
	stop    context.CancelFunc
}

// acquireForwarder returns the view's forwarder to out, created if it has none, counting one more watch.
func acquireForwarder[T any](st *prefixedState, out chan<- T) *forwarder[T] {
	st.forwardersMu.Lock()
	defer st.forwardersMu.Unlock()

	if v, ok := st.forwarders[out]; ok {
		fw := v.(*forwarder[T]) //nolint:forcetypeassert // A channel's forwarder is of its type.
		fw.watches++

		return fw
	}

	fw := &forwarder[T]{view: st, out: out, in: make(chan T), watches: 1}

	if st.forwarders == nil {
		st.forwarders = map[any]any{}
	}

	st.forwarders[out] = fw

	return fw
}

// start starts the forwarder's goroutine, unless it runs.
func (fw *forwarder[T]) start(translate func(T) T) {
	fw.view.forwardersMu.Lock()
	defer fw.view.forwardersMu.Unlock()

	if fw.stop != nil {
		return
	}

	ctx, stop := context.WithCancel(context.Background()) //nolint:gosec // The forwarder's last watch calls it (release).
	fw.stop = stop

	go fw.run(ctx, translate)
}

// release counts one watch less, and ends the forwarder after its last one. The host's watch of a context
// that ended sends nothing more, so that nobody is left sending to in.
func (fw *forwarder[T]) release() {
	fw.view.forwardersMu.Lock()
	defer fw.view.forwardersMu.Unlock()

	if fw.watches--; fw.watches > 0 {
		return
	}

	delete(fw.view.forwarders, fw.out)

	if fw.stop != nil {
		fw.stop()
	}
}

// run hands what in receives on to out, translated, until ctx is done.
func (fw *forwarder[T]) run(ctx context.Context, translate func(T) T) {
	for {
		select {
		case <-ctx.Done():
			return
		case v := <-fw.in:
			if !channel.SendWithContext(ctx, fw.out, translate(v)) {
				return
			}
		}
	}
}

// hostNamespace returns where the host's state stores the view's namespace ns, or ErrNamespaceOutsideView.
func (st *prefixedState) hostNamespace(ns resource.Namespace) (resource.Namespace, error) {
	if !st.namespaces[ns] {
		return "", fmt.Errorf("namespace %q is not one of talos-ccm's (%s), which the prefix %q stores in the host's state: %w",
			ns, strings.Join(slices.Sorted(maps.Keys(st.namespaces)), ", "), st.prefix, ErrNamespaceOutsideView)
	}

	return HostNamespace(st.prefix, ns), nil
}

// viewNamespace returns the view's namespace of the host's namespace ns.
func (st *prefixedState) viewNamespace(ns resource.Namespace) (resource.Namespace, error) {
	viewNs, ok := strings.CutPrefix(ns, st.prefix)
	if !ok || !st.namespaces[viewNs] {
		return "", fmt.Errorf("the host's state returned a resource of namespace %q, outside of the prefix %q: %w", ns, st.prefix, ErrNamespaceOutsideView)
	}

	return viewNs, nil
}

// hostRef returns the host's reference of the resource id of kind (the kind itself when id is empty).
func (st *prefixedState) hostRef(kind resource.Kind, id resource.ID) (hostRef, error) {
	ns, err := st.hostNamespace(kind.Namespace())
	if err != nil {
		return hostRef{}, err
	}

	return hostRef{ns: ns, typ: kind.Type(), id: id}, nil
}

// hostRef names a resource (or a kind, with no ID) of the host's state in the view's reads, watches and
// destroys: a resource.Metadata would do too, at a few hundred bytes per call instead of a few dozen, and
// every read of every embedded cluster makes one.
type hostRef struct {
	ns  resource.Namespace
	typ resource.Type
	id  resource.ID
}

// Namespace implements resource.Pointer.
func (r hostRef) Namespace() resource.Namespace { return r.ns }

// Type implements resource.Pointer.
func (r hostRef) Type() resource.Type { return r.typ }

// ID implements resource.Pointer.
func (r hostRef) ID() resource.ID { return r.id }

// String names the resource in the host's errors, as resource.Metadata does.
func (r hostRef) String() string { return pointerString(r) }

// hostResource returns a copy of r in the host's namespace.
func (st *prefixedState) hostResource(r resource.Resource) (resource.Resource, error) { //nolint:ireturn
	ns, err := st.hostNamespace(r.Metadata().Namespace())
	if err != nil {
		return nil, err
	}

	return copyInNamespace(r, ns)
}

// viewResource returns the host's resource r in the view's namespace: a copy of r whose metadata is its
// own and whose spec is r's (see sharedInNamespace).
func (st *prefixedState) viewResource(r resource.Resource) (resource.Resource, error) { //nolint:ireturn
	ns, err := st.viewNamespace(r.Metadata().Namespace())
	if err != nil {
		return nil, err
	}

	return sharedInNamespace(r, ns)
}

// viewEvent translates an event of the host's state: its resource, its old resource and its error. An
// event that cannot be translated becomes an Errored event.
func (st *prefixedState) viewEvent(e state.Event) state.Event {
	var err error

	if e.Resource != nil {
		if e.Resource, err = st.viewResource(e.Resource); err != nil {
			return state.Event{Type: state.Errored, Error: err}
		}
	}

	if e.Old != nil {
		if e.Old, err = st.viewResource(e.Old); err != nil {
			return state.Event{Type: state.Errored, Error: err}
		}
	}

	if e.Error != nil {
		e.Error = st.viewError(e.Error)
	}

	return e
}

// copyInNamespace returns a deep copy of r in the namespace ns.
func copyInNamespace(r resource.Resource, ns resource.Namespace) (resource.Resource, error) { //nolint:ireturn
	return moved(r, r.DeepCopy(), ns)
}

// sharedInNamespace returns r in the namespace ns: a copy of r's struct with metadata of its own, whose
// spec is r's. What the view reads from the host is read, never changed (the rule of talos-ccm's in-memory
// state, whose reads are its stored resources, checked in the tests: checkSharedReads): so its spec need
// not be copied, which was the larger part of an embedded cluster's allocations, the spec of every
// resource each of its controllers reads. A resource that is not a pointer to a struct is copied whole.
func sharedInNamespace(r resource.Resource, ns resource.Namespace) (resource.Resource, error) { //nolint:ireturn
	v := reflect.ValueOf(r)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return copyInNamespace(r, ns)
	}

	shallow := reflect.New(v.Elem().Type())
	shallow.Elem().Set(v.Elem())

	out, ok := shallow.Interface().(resource.Resource)
	if !ok {
		return copyInNamespace(r, ns)
	}

	return moved(r, out, ns)
}

// moved gives out, a copy of r, r's metadata in the namespace ns, and returns it. Every resource
// implementation of the COSI runtime (typed, protobuf, Any, tombstones) returns a pointer to its own
// metadata, which is what replacing it relies on; a copy whose metadata is still r's (refused before r is
// written to) or is not its own is refused rather than written to the wrong namespace.
func moved(r, out resource.Resource, ns resource.Namespace) (resource.Resource, error) { //nolint:ireturn
	if out.Metadata() == r.Metadata() {
		return nil, errNotOwnMetadata(r, ns)
	}

	*out.Metadata() = withNamespace(r.Metadata(), ns)

	if out.Metadata().Namespace() != ns {
		return nil, errNotOwnMetadata(r, ns)
	}

	return out, nil
}

// errNotOwnMetadata is moved's error for a resource r whose Metadata() is not its own.
func errNotOwnMetadata(r resource.Resource, ns resource.Namespace) error {
	return fmt.Errorf("failed to move %s to namespace %q: its Metadata() is not a pointer to its own metadata", resource.String(r), ns)
}

// withNamespace returns a copy of md in the namespace ns. resource.Metadata has no namespace setter: the
// copy is built field by field (labels and annotations share their storage copy-on-write, as
// Metadata.Copy does).
func withNamespace(md *resource.Metadata, ns resource.Namespace) resource.Metadata {
	out := resource.NewMetadata(ns, md.Type(), md.ID(), md.Version())
	out.SetCreated(md.Created())
	out.SetUpdated(md.Updated())
	out.SetPhase(md.Phase())
	// Setting the owner of fresh metadata cannot fail.
	_ = out.SetOwner(md.Owner())
	*out.Labels() = *md.Labels()
	*out.Annotations() = *md.Annotations()
	out.Finalizers().Set(*md.Finalizers())

	return out
}

// pointerString names a pointer in an error.
func pointerString(ptr resource.Pointer) string {
	return fmt.Sprintf("%s(%s/%s)", ptr.Type(), ptr.Namespace(), ptr.ID())
}

// Package ctest runs controllers on an in-memory state for controller tests: one Suite per test, with the
// runtime started and stopped around it, assertions that wait on watch events with a timeout of their own,
// create/update helpers that fail the test on error, and a goroutine leak check once everything stopped.
package ctest

import (
	"context"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	cosiruntime "github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/rtestutils"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/keyed"
)

// Defaults of a Suite.
const (
	// DefaultTimeout bounds a whole test: the context Start returns ends then.
	DefaultTimeout = 30 * time.Second
	// DefaultAssertionTimeout bounds one assertion: a controller that never converges fails the assertion
	// that waits for it, with its own message, not the whole test at its deadline.
	DefaultAssertionTimeout = 10 * time.Second
)

// Option configures a Suite.
type Option func(*options)

type options struct {
	state            state.State
	stateOptions     []inmem.StateOption
	leakIgnore       []goleak.Option
	logger           *zap.Logger
	timeout          time.Duration
	assertionTimeout time.Duration
	noLeakCheck      bool
}

// WithTimeout bounds the whole test (DefaultTimeout otherwise).
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// WithAssertionTimeout bounds each assertion (DefaultAssertionTimeout otherwise).
func WithAssertionTimeout(d time.Duration) Option {
	return func(o *options) { o.assertionTimeout = d }
}

// WithStateOptions builds the in-memory state with these options (a backing store: see
// cosistate.MemoryStateBuilder).
func WithStateOptions(opts ...inmem.StateOption) Option {
	return func(o *options) { o.stateOptions = append(o.stateOptions, opts...) }
}

// WithState runs the suite on an existing state instead of a fresh one: a second suite on the first's
// state is a restart of talos-ccm that keeps its state.
func WithState(st state.State) Option {
	return func(o *options) { o.state = st }
}

// WithLogger gives the runtime this logger instead of one that writes to the test's log.
func WithLogger(logger *zap.Logger) Option {
	return func(o *options) { o.logger = logger }
}

// WithLeakIgnore ignores these goroutines in the leak check (for example a client library's daemon).
func WithLeakIgnore(opts ...goleak.Option) Option {
	return func(o *options) { o.leakIgnore = append(o.leakIgnore, opts...) }
}

// WithoutLeakCheck skips the goroutine leak check: for tests that run in parallel with others, whose
// goroutines the check cannot tell apart.
func WithoutLeakCheck() Option {
	return func(o *options) { o.noLeakCheck = true }
}

// Suite is a controller runtime over an in-memory namespaced state, for one test.
type Suite struct {
	// State is the state the controllers read and write, as the test reads it: its reads are copies.
	State state.State

	t       *testing.T
	runtime *cosiruntime.Runtime
	// watches are the watches of the state the runtime runs on that the controllers that learn what
	// changed themselves share (the decisions and the sinks), as in a pipeline.
	watches *keyed.Watches
	ctx     context.Context //nolint:containedctx // The suite's context is the test's, bounded by its timeout.
	cancel  context.CancelFunc
	done    chan error
	stop    sync.Once
	opts    options
}

// New creates the suite: register controllers, then call Start. Unless told otherwise it checks, once the
// test and its other cleanups are over, that no goroutine started during the test is left.
func New(t *testing.T, opts ...Option) *Suite {
	t.Helper()

	o := options{timeout: DefaultTimeout, assertionTimeout: DefaultAssertionTimeout}
	for _, opt := range opts {
		opt(&o)
	}

	if !o.noLeakCheck {
		// Cleanups run last-in first-out: this one runs after the runtime has stopped.
		ignore := append([]goleak.Option{goleak.IgnoreCurrent()}, o.leakIgnore...)
		t.Cleanup(func() { goleak.VerifyNone(t, ignore...) })
	}

	st := o.state
	if st == nil {
		// The state talos-ccm runs on: reads share the stored resources, and a watcher never falls behind a
		// burst.
		st = state.WrapCore(namespaced.NewState(cosistate.MemoryStateBuilder(o.stateOptions...)))
	}

	logger := o.logger
	if logger == nil {
		logger = zaptest.NewLogger(t)
	}

	rt, err := cosiruntime.NewRuntime(st, logger)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(t.Context(), o.timeout)
	t.Cleanup(cancel)

	return &Suite{State: state.WrapCore(copiedReads{CoreState: st}), t: t, runtime: rt, watches: keyed.NewWatches(st), ctx: ctx, cancel: cancel, opts: o}
}

// copiedReads is the state as the test reads it: copies of the stored resources. The controllers read
// the stored resources themselves, as they do in talos-ccm (and TALOS_CCM_CHECK_SHARED_READS=1 ends the
// test if one changes what it read); a test may change what it read and write it back, as it could when
// every read of the in-memory state was a copy.
type copiedReads struct {
	state.CoreState
}

// Get implements state.CoreState.
func (s copiedReads) Get(ctx context.Context, ptr resource.Pointer, opts ...state.GetOption) (resource.Resource, error) { //nolint:ireturn
	res, err := s.CoreState.Get(ctx, ptr, opts...)
	if err != nil {
		return nil, err //nolint:wrapcheck // The state's own error, which the test asserts on.
	}

	return res.DeepCopy(), nil
}

// List implements state.CoreState.
func (s copiedReads) List(ctx context.Context, kind resource.Kind, opts ...state.ListOption) (resource.List, error) {
	list, err := s.CoreState.List(ctx, kind, opts...)
	if err != nil {
		return list, err //nolint:wrapcheck // The state's own error, which the test asserts on.
	}

	items := make([]resource.Resource, len(list.Items))
	for i, res := range list.Items {
		items[i] = res.DeepCopy()
	}

	return resource.List{Items: items}, nil
}

// Register adds controllers (controller.Controller or controller.QController). A controller that learns
// what changed itself (the decisions and the sinks) is given the suite's watches of the state.
func (s *Suite) Register(ctrls ...any) {
	s.t.Helper()

	for _, ctrl := range ctrls {
		if watching, ok := ctrl.(interface{ SetWatches(w *keyed.Watches) }); ok {
			watching.SetWatches(s.watches)
		}

		switch c := ctrl.(type) {
		case controller.QController:
			require.NoError(s.t, s.runtime.RegisterQController(c))
		case controller.Controller:
			require.NoError(s.t, s.runtime.RegisterController(c))
		default:
			s.t.Fatalf("not a controller: %T", ctrl)
		}
	}
}

// Start runs the runtime until Stop or the end of the test, and returns the test's context.
func (s *Suite) Start() context.Context {
	s.t.Helper()

	s.done = make(chan error, 1)

	go func() { s.done <- s.runtime.Run(s.ctx) }()

	s.t.Cleanup(s.Stop)

	return s.ctx
}

// Stop stops the runtime and fails the test if it stopped with an error; the state stays readable.
func (s *Suite) Stop() {
	s.stop.Do(func() {
		s.cancel()

		if s.done != nil {
			require.NoError(s.t, <-s.done)
		}
	})
}

// Ctx is the test's context, bounded by the suite's timeout; it ends at Stop.
func (s *Suite) Ctx() context.Context {
	return s.ctx
}

// Create creates resources, failing the test on error.
func (s *Suite) Create(res ...resource.Resource) {
	s.t.Helper()

	for _, r := range res {
		require.NoError(s.t, s.State.Create(s.ctx, r), "create %s", r.Metadata())
	}
}

// Update writes resources as they are, failing the test on error (the version must be current).
func (s *Suite) Update(res ...resource.Resource) {
	s.t.Helper()

	for _, r := range res {
		require.NoError(s.t, s.State.Update(s.ctx, r), "update %s", r.Metadata())
	}
}

// assertionContext bounds one assertion.
func (s *Suite) assertionContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.ctx, s.opts.assertionTimeout)
}

// Modify changes the resource of r's ID (creating it from r when it does not exist) with fn, retrying on
// conflicts, and fails the test on error.
func Modify[R resource.Resource](s *Suite, r R, fn func(R) error) {
	s.t.Helper()

	require.NoError(s.t, safe.StateModify(s.ctx, s.State, r, fn), "modify %s", r.Metadata())
}

// AssertResource waits until the resource of id exists and passes check.
func AssertResource[R rtestutils.ResourceWithRD](s *Suite, id resource.ID, check func(R, *assert.Assertions), opts ...rtestutils.Option) {
	s.t.Helper()

	ctx, cancel := s.assertionContext()
	defer cancel()

	rtestutils.AssertResource(ctx, s.t, s.State, id, check, opts...)
}

// AssertResources waits until every resource of ids exists and passes check.
func AssertResources[R rtestutils.ResourceWithRD](s *Suite, ids []resource.ID, check func(R, *assert.Assertions), opts ...rtestutils.Option) {
	s.t.Helper()

	ctx, cancel := s.assertionContext()
	defer cancel()

	rtestutils.AssertResources(ctx, s.t, s.State, ids, check, opts...)
}

// AssertNoResource waits until the resource of id does not exist.
func AssertNoResource[R rtestutils.ResourceWithRD](s *Suite, id resource.ID, opts ...rtestutils.Option) {
	s.t.Helper()

	ctx, cancel := s.assertionContext()
	defer cancel()

	rtestutils.AssertNoResource[R](ctx, s.t, s.State, id, opts...)
}

// AssertLength waits until there are exactly n resources of the type.
func AssertLength[R rtestutils.ResourceWithRD](s *Suite, n int, opts ...rtestutils.Option) {
	s.t.Helper()

	ctx, cancel := s.assertionContext()
	defer cancel()

	rtestutils.AssertLength[R](ctx, s.t, s.State, n, opts...)
}

// Destroy destroys the resources of ids, waiting for their finalizers to be removed.
func Destroy[R rtestutils.ResourceWithRD](s *Suite, ids ...resource.ID) {
	s.t.Helper()

	ctx, cancel := s.assertionContext()
	defer cancel()

	rtestutils.Destroy[R](ctx, s.t, s.State, ids)
}

// bubbleOf finds the synctest bubble in a goroutine's header ("goroutine 7 [select, synctest bubble 3]:").
var bubbleOf = regexp.MustCompile(`synctest bubble \d+\]`)

// ControllerGoroutines returns the stacks of the goroutines of the calling synctest bubble that run
// controllers: the runtime's adapters of plain and queued controllers (a plain one's Run; a queued one's
// queue loop, workers and the group waiting for them) and the workers of keyed queues. Called in the bubble
// once synctest.Wait returned, it tells what an idle controller costs.
func ControllerGoroutines() []string {
	buf := make([]byte, 1<<22)
	stacks := strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n")

	// The calling goroutine's stack comes first.
	bubble := bubbleOf.FindString(stacks[0])
	if bubble == "" {
		return nil
	}

	var held []string

	for _, stack := range stacks {
		header, _, _ := strings.Cut(stack, "\n")
		if !strings.Contains(header, bubble) {
			continue
		}

		if strings.Contains(stack, "pkg/controller/runtime/internal/rruntime.") ||
			strings.Contains(stack, "pkg/controller/runtime/internal/qruntime.") ||
			strings.Contains(stack, "talos-ccm/internal/keyed.") {
			held = append(held, stack)
		}
	}

	return held
}

// Package ctest runs controllers on an in-memory state for controller tests.
package ctest

import (
	"context"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
)

// Runtime is a controller runtime over a fresh in-memory state, stopped when the test ends.
type Runtime struct {
	State   state.State
	runtime *runtime.Runtime
}

// New creates the runtime; register controllers, then call Start.
func New(t *testing.T) *Runtime {
	t.Helper()

	st := state.WrapCore(namespaced.NewState(inmem.Build))

	rt, err := runtime.NewRuntime(st, zaptest.NewLogger(t))
	require.NoError(t, err)

	return &Runtime{State: st, runtime: rt}
}

// Register adds a controller (controller.Controller or controller.QController).
func (r *Runtime) Register(t *testing.T, ctrl any) {
	t.Helper()

	switch c := ctrl.(type) {
	case controller.QController:
		require.NoError(t, r.runtime.RegisterQController(c))
	case controller.Controller:
		require.NoError(t, r.runtime.RegisterController(c))
	default:
		t.Fatalf("not a controller: %T", ctrl)
	}
}

// Start runs the runtime until the test ends and returns a context bounded by timeout.
func (r *Runtime) Start(t *testing.T, timeout time.Duration) context.Context {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	done := make(chan error, 1)

	go func() { done <- r.runtime.Run(ctx) }()

	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	return ctx
}

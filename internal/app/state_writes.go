package app

import (
	"context"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
)

// serialWrites lets one write at a time into the sqlite state. sqlite takes one writer at a time anyway;
// without this, concurrent writers each hold a pooled connection while they wait for the write lock, and
// the watches, which need a connection to read new events, wait behind them: decisions then reach their
// sinks seconds late under load.
type serialWrites struct {
	state.CoreState

	turn chan struct{}
}

func newSerialWrites(st state.CoreState) *serialWrites {
	return &serialWrites{CoreState: st, turn: make(chan struct{}, 1)}
}

// write runs fn when it is this writer's turn, or fails when ctx ends first.
func (s *serialWrites) write(ctx context.Context, fn func() error) error {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}

	defer func() { <-s.turn }()

	return fn()
}

func (s *serialWrites) Create(ctx context.Context, res resource.Resource, opts ...state.CreateOption) error {
	return s.write(ctx, func() error { return s.CoreState.Create(ctx, res, opts...) })
}

func (s *serialWrites) Update(ctx context.Context, res resource.Resource, opts ...state.UpdateOption) error {
	return s.write(ctx, func() error { return s.CoreState.Update(ctx, res, opts...) })
}

func (s *serialWrites) Destroy(ctx context.Context, ptr resource.Pointer, opts ...state.DestroyOption) error {
	return s.write(ctx, func() error { return s.CoreState.Destroy(ctx, ptr, opts...) })
}

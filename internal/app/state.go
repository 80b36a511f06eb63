package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/cosi-project/state-sqlite/pkg/sqlitexx"
	"github.com/cosi-project/state-sqlite/pkg/state/impl/sqlite"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/resources"
)

// StateFileName is the sqlite database in the state directory.
const StateFileName = "state.db"

// inMemoryHistory is how many events each in-memory collection keeps for watchers: bursts of thousands
// of Node events are normal at start-up, and a watcher that falls behind the history has to restart.
const inMemoryHistory = 16384

// NewState builds talos-ccm's state: the decision namespaces in a sqlite database under dir, everything
// else (mirrors and facts, rebuilt from their sources) in memory. An empty dir keeps everything in
// memory. The returned function closes the database.
func NewState(ctx context.Context, dir string, logger *zap.Logger) (state.State, func(), error) {
	memory := inmem.NewStateWithOptions(
		inmem.WithHistoryInitialCapacity(1024),
		inmem.WithHistoryMaxCapacity(inMemoryHistory),
		inmem.WithHistoryGap(64),
	)

	if dir == "" {
		return state.WrapCore(namespaced.NewState(func(ns resource.Namespace) state.CoreState { return memory(ns) })), func() {}, nil
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("failed to create state directory %q: %w", dir, err)
	}

	path := filepath.Join(dir, StateFileName)

	pool, err := sqlitexx.NewPool("file:"+path, sqlitexx.PoolOptions{LowWatermark: 2, HighWatermark: 16})
	if err != nil {
		return nil, nil, fmt.Errorf("failed to open state database %q: %w", path, err)
	}

	db, err := sqlite.NewState(ctx, pool, store.ProtobufMarshaler{}, sqlite.WithLogger(logger.Named("sqlite")))
	if err != nil {
		pool.Close() //nolint:errcheck

		return nil, nil, fmt.Errorf("failed to open state database %q: %w", path, err)
	}

	persisted := map[resource.Namespace]bool{}

	for _, ns := range resources.Namespaces() {
		persisted[ns.Name] = ns.Persisted
	}

	st := namespaced.NewState(func(ns resource.Namespace) state.CoreState {
		if persisted[ns] {
			return db
		}

		return memory(ns)
	})

	closeFn := func() {
		db.Close()

		if err := pool.Close(); err != nil {
			logger.Warn("failed to close state database", zap.Error(err))
		}
	}

	return state.WrapCore(st), closeFn, nil
}

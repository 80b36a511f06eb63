package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime/options"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/cosi-project/state-sqlite/pkg/state/impl/sqlite"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/resources"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// StateFileName is the sqlite database in the state directory.
const StateFileName = "state.db"

// NewState builds talos-ccm's state: the decision namespaces in a sqlite database under dir, everything
// else (mirrors and facts, rebuilt from their sources) in memory. An empty dir keeps everything in
// memory. The returned function closes the database.
//
// A database that cannot be opened is an error that says how to recover, unless rebuild is set: then it is
// moved aside (never deleted) and talos-ccm starts with an empty one; the decisions are rebuilt from
// Kubernetes and Talos (every allocator rebuilds its allocations from the Nodes and Services).
func NewState(ctx context.Context, dir string, rebuild bool, logger *zap.Logger) (state.State, func(), error) {
	// Mirrors and facts: in memory, with a watch history long enough for the bursts of Node events of a
	// large cluster (a watcher that falls behind the history has to restart).
	memory := ccm.MemoryStateBuilder()

	if dir == "" {
		return state.WrapCore(namespaced.NewState(memory)), func() {}, nil
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("failed to create state directory %q: %w", dir, err)
	}

	path := filepath.Join(dir, StateFileName)

	pool, db, err := openDatabase(ctx, path, logger)
	if err != nil && rebuild {
		moved, moveErr := moveAside(path)
		if moveErr != nil {
			return nil, nil, errors.Join(err, moveErr)
		}

		logger.Warn("state database unreadable: moved aside, rebuilding the decisions from Kubernetes and Talos",
			zap.String("path", path), zap.String("moved_to", moved), zap.Error(err))

		pool, db, err = openDatabase(ctx, path, logger)
	}

	if err != nil {
		return nil, nil, fmt.Errorf("%w (to move it aside and rebuild the decisions from Kubernetes and Talos, start with --rebuild-state)", err)
	}

	persisted := map[resource.Namespace]bool{}

	for _, ns := range resources.Namespaces() {
		persisted[ns.Name] = ns.Persisted
	}

	writes := newPersistedState(db)

	st := namespaced.NewState(func(ns resource.Namespace) state.CoreState {
		if persisted[ns] {
			return writes
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

func openDatabase(ctx context.Context, path string, logger *zap.Logger) (*configuredPool, *sqlite.State, error) {
	pool, err := newConfiguredPool(path)
	if err != nil {
		return nil, nil, err
	}

	db, err := sqlite.NewState(ctx, pool, store.ProtobufMarshaler{}, sqlite.WithLogger(logger.Named("sqlite")))
	if err != nil {
		pool.Close() //nolint:errcheck

		return nil, nil, fmt.Errorf("failed to open state database %q: %w", path, err)
	}

	return pool, db, nil
}

// moveAside renames the database and its journal files to <name>.broken-<time>, keeping them for a post
// mortem.
func moveAside(path string) (string, error) {
	suffix := ".broken-" + time.Now().UTC().Format("20060102T150405Z")

	for _, ext := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(path+ext, path+ext+suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("failed to move the state database aside: %w", err)
		}
	}

	return path + suffix, nil
}

// cachedResources makes controllers read the persisted resources from memory: the runtime keeps them
// current through a watch, and the sqlite database is only written.
func cachedResources() []options.Option {
	var opts []options.Option

	persisted := map[resource.Namespace]bool{}

	for _, ns := range resources.Namespaces() {
		persisted[ns.Name] = ns.Persisted
	}

	for _, r := range resources.All() {
		rd := r.ResourceDefinition()

		if persisted[rd.DefaultNamespace] {
			opts = append(opts, options.WithCachedResource(rd.DefaultNamespace, rd.Type))
		}
	}

	return opts
}

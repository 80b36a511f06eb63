package app

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/cosi-project/state-sqlite/pkg/state/impl/sqlite"
	"go.uber.org/zap"

	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources"
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
	// Mirrors and facts: in memory.
	memory := cosistate.MemoryStateBuilder()

	if dir == "" {
		return state.WrapCore(namespaced.NewState(memory)), func() {}, nil
	}

	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("failed to create state directory %q: %w", dir, err)
	}

	path := filepath.Join(dir, StateFileName)

	pool, db, decisions, err := openDatabase(ctx, path, logger)
	if err != nil && rebuild {
		moved, moveErr := moveAside(path)
		if moveErr != nil {
			return nil, nil, errors.Join(err, moveErr)
		}

		logger.Warn("state database unreadable: moved aside, rebuilding the decisions from Kubernetes and Talos",
			zap.String("path", path), zap.String("moved_to", moved), zap.Error(err))

		pool, db, decisions, err = openDatabase(ctx, path, logger)
	}

	if err != nil {
		return nil, nil, fmt.Errorf("%w (to move it aside and rebuild the decisions from Kubernetes and Talos, start with --rebuild-state)", err)
	}

	persisted := persistedNamespaces()

	// The decisions live in memory too, with the database as their backing store.
	st := namespaced.NewState(func(ns resource.Namespace) state.CoreState {
		if persisted[ns] {
			return memoryWithStore(decisions, ns)
		}

		return memory(ns)
	})

	closeFn := func() {
		if err := decisions.Close(); err != nil {
			logger.Warn("failed to write the last decisions to the state database", zap.Error(err))
		}

		db.Close()

		if err := pool.Close(); err != nil {
			logger.Warn("failed to close state database", zap.Error(err))
		}
	}

	return state.WrapCore(st), closeFn, nil
}

// memoryWithStore is the in-memory state of a persisted namespace, with the database as its backing store.
func memoryWithStore(decisions *sqliteStore, ns resource.Namespace) state.CoreState {
	return cosistate.MemoryStateBuilder(inmem.WithBackingStore(decisions.namespace(ns)))(ns)
}

// persistedNamespaces are the namespaces whose resources are kept in the database.
func persistedNamespaces() map[resource.Namespace]bool {
	persisted := map[resource.Namespace]bool{}

	for _, ns := range resources.Namespaces() {
		persisted[ns.Name] = ns.Persisted
	}

	return persisted
}

// openDatabase opens the state database and reads the decisions in it.
func openDatabase(ctx context.Context, path string, logger *zap.Logger) (*configuredPool, *sqlite.State, *sqliteStore, error) {
	pool, err := newConfiguredPool(path)
	if err != nil {
		return nil, nil, nil, err
	}

	db, err := sqlite.NewState(ctx, pool, store.ProtobufMarshaler{}, sqlite.WithLogger(logger.Named("sqlite")))
	if err != nil {
		pool.Close() //nolint:errcheck

		return nil, nil, nil, fmt.Errorf("failed to open state database %q: %w", path, err)
	}

	persisted := persistedNamespaces()

	var kinds []resource.Kind

	for _, r := range resources.All() {
		rd := r.ResourceDefinition()
		if persisted[rd.DefaultNamespace] {
			kinds = append(kinds, resource.NewMetadata(rd.DefaultNamespace, rd.Type, "", resource.VersionUndefined))
		}
	}

	decisions, err := newSQLiteStore(ctx, db, kinds, logger.Named("state"))
	if err != nil {
		db.Close()
		pool.Close() //nolint:errcheck

		return nil, nil, nil, fmt.Errorf("failed to read state database %q: %w", path, err)
	}

	return pool, db, decisions, nil
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

package app

import (
	"context"
	"fmt"
	"sync"

	"github.com/cosi-project/state-sqlite/pkg/sqlitexx"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// poolConnections is how many connections the state database keeps open. Connections are never closed
// while talos-ccm runs, so each is set up once.
const poolConnections = 8

// connectionPragmas are set on every connection of the state database:
//   - busy_timeout: concurrent writers wait for each other instead of failing with SQLITE_BUSY;
//   - synchronous=NORMAL: in WAL mode a commit survives a crash of talos-ccm (SIGKILL, OOM) and is only
//     at risk on a power loss, which costs a few decisions that are rebuilt from Kubernetes and Talos,
//     instead of an fsync on every decision;
//   - cache_size: each connection caches 512 KiB of the database's pages (SQLite's default is 2 MiB). The
//     state is read whole once, at start, and then written a row at a time: eight connections with the
//     default cache held up to 16 MiB of pages at 5,000 Nodes for reads that never come.
var connectionPragmas = []string{
	"PRAGMA busy_timeout = 5000;",
	"PRAGMA synchronous = NORMAL;",
	"PRAGMA cache_size = -512;",
}

// configuredPool hands out connections of a sqlitexx.Pool with connectionPragmas set.
type configuredPool struct {
	*sqlitexx.Pool

	configured sync.Map // *sqlite.Conn -> struct{}
}

func newConfiguredPool(path string) (*configuredPool, error) {
	pool, err := sqlitexx.NewPool("file:"+path, sqlitexx.PoolOptions{LowWatermark: poolConnections, HighWatermark: poolConnections})
	if err != nil {
		return nil, fmt.Errorf("failed to open state database %q: %w", path, err)
	}

	return &configuredPool{Pool: pool}, nil
}

// Take implements sqlite.SqlitexPool.
func (p *configuredPool) Take(ctx context.Context) (*sqlite.Conn, error) {
	conn, err := p.Pool.Take(ctx)
	if err != nil {
		return nil, err
	}

	if _, done := p.configured.Load(conn); done {
		return conn, nil
	}

	for _, pragma := range connectionPragmas {
		if err = sqlitex.ExecuteTransient(conn, pragma, nil); err != nil {
			p.Put(conn)

			return nil, fmt.Errorf("failed to set up a state database connection (%s): %w", pragma, err)
		}
	}

	p.configured.Store(conn, struct{}{})

	return conn, nil
}

package app

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// TestConfiguredPoolPragmas: every connection of the state database waits for other writers, syncs as WAL
// mode allows, and caches 512 KiB of pages, not SQLite's default 2 MiB.
func TestConfiguredPoolPragmas(t *testing.T) {
	t.Parallel()

	pool, err := newConfiguredPool(filepath.Join(t.TempDir(), "state.db"))
	require.NoError(t, err)

	t.Cleanup(func() { pool.Close() }) //nolint:errcheck

	// Two connections at once: each is set up, not only the first.
	for range 2 {
		conn, err := pool.Take(t.Context())
		require.NoError(t, err)

		defer pool.Put(conn)

		for pragma, want := range map[string]int64{"busy_timeout": 5000, "synchronous": 1, "cache_size": -512} {
			var got int64

			require.NoError(t, sqlitex.ExecuteTransient(conn, "PRAGMA "+pragma+";", &sqlitex.ExecOptions{
				ResultFunc: func(stmt *sqlite.Stmt) error {
					got = stmt.ColumnInt64(0)

					return nil
				},
			}))
			assert.Equal(t, want, got, pragma)
		}
	}
}

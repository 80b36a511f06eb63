package main

import (
	"bytes"
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReportPerScenario(t *testing.T) {
	t.Parallel()

	res := &result{
		scenario:           scenario{nodes: 100},
		goroutines:         350,
		baselineGoroutines: 200,
		idle:               time.Minute,
		idleHeapStart:      40 << 20,
		idleHeapEnd:        41.5 * (1 << 20),
	}
	what := measured{commit: "abc1234", version: "v0", concurrency: 64, binary: binarySize{file: 90 << 20, code: 35 << 20, rodata: 41 << 20}}
	opts := options{floor: floorSpec{writes: 2, concurrency: 64}}

	var out bytes.Buffer

	reportHeader(&out, what, opts)
	report(&out, []*result{res}, what, opts)

	text := out.String()
	assert.Contains(t, text, "NODES carry the status a kubelet posts: 50 images")
	assert.Regexp(t, `100 nodes +binary: file / code / read-only data +90 MiB / 35 MiB / 41 MiB`, text)
	assert.Regexp(t, `100 nodes +after init: goroutines per machine +1\.50 +- +\(\(350 - 200\) / 100`, text)
	assert.Regexp(t, `100 nodes +idle 1m0s: live heap growth +\+1\.5 MiB +- +\(.*40\.0 MiB\)`, text)

	path := filepath.Join(t.TempDir(), "results.csv")
	require.NoError(t, writeCSV(path, []*result{res}, what, opts))

	f, err := os.Open(path)
	require.NoError(t, err)

	defer f.Close() //nolint:errcheck

	rows, err := csv.NewReader(f).ReadAll()
	require.NoError(t, err, "every row has as many columns as the header")
	require.Len(t, rows, 2)

	column := func(name string) string {
		i := slices.Index(rows[0], name)
		require.GreaterOrEqual(t, i, 0, name)

		return rows[1][i]
	}

	assert.Equal(t, "kubelet", column("node_status"))
	assert.Equal(t, "94371840", column("binary_bytes"))
	assert.Equal(t, "200", column("goroutines_baseline"))
	assert.Equal(t, "1.500", column("goroutines_per_machine"))
	assert.Equal(t, "40.00", column("idle_live_heap_start_mib"))
	assert.Equal(t, "1.50", column("idle_live_heap_growth_mib"))
}

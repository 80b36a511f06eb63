package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReplaceBlock(t *testing.T) {
	t.Parallel()

	const report = "commit abc\n\nSCENARIO  MEASURE\n100 nodes  wall\n"

	for _, tc := range []struct {
		name, doc, want, err string
	}{
		{
			name: "empty block",
			doc:  "# Perf\n<!-- bench-table:begin -->\n<!-- bench-table:end -->\nafter\n",
			want: "# Perf\n<!-- bench-table:begin -->\n```\n" + report + "```\n<!-- bench-table:end -->\nafter\n",
		},
		{
			name: "old table replaced, the rest kept",
			doc:  "before\n\n<!-- bench-table:begin -->\n```\nold\n```\n<!-- bench-table:end -->\n\nafter",
			want: "before\n\n<!-- bench-table:begin -->\n```\n" + report + "```\n<!-- bench-table:end -->\n\nafter",
		},
		{
			name: "indented markers, end marker last without a line break",
			doc:  "  <!-- bench-table:begin -->\nold\n  <!-- bench-table:end -->",
			want: "  <!-- bench-table:begin -->\n```\n" + report + "```\n  <!-- bench-table:end -->",
		},
		{
			name: "no markers",
			doc:  "# Perf\n```\nold\n```\n",
			err:  "no markers",
		},
		{
			name: "no end marker",
			doc:  "<!-- bench-table:begin -->\nold\n",
			err:  "no marker <!-- bench-table:end --> after",
		},
		{
			name: "no begin marker",
			doc:  "old\n<!-- bench-table:end -->\n",
			err:  "no marker <!-- bench-table:begin --> before",
		},
		{
			name: "markers swapped",
			doc:  "<!-- bench-table:end -->\nold\n<!-- bench-table:begin -->\n",
			err:  "comes before",
		},
		{
			name: "two blocks",
			doc:  "<!-- bench-table:begin -->\n<!-- bench-table:end -->\n<!-- bench-table:begin -->\n<!-- bench-table:end -->\n",
			err:  "twice",
		},
		{
			name: "a marker inside a line is no marker",
			doc:  "see `<!-- bench-table:begin -->`\n",
			err:  "no markers",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			got, err := replaceBlock(tc.doc, report)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)

				return
			}

			require.NoError(t, err)
			assert.Equal(t, tc.want, got)

			again, err := replaceBlock(got, report)
			require.NoError(t, err)
			assert.Equal(t, got, again, "replacing twice changes nothing more")
		})
	}
}

func TestFence(t *testing.T) {
	t.Parallel()

	assert.Equal(t, "```\ntable\n```\n", fence("table"))
	assert.Equal(t, "```\ntable\n```\n", fence("\ntable\n"))
	assert.Equal(t, "````\na ``` b\n````\n", fence("a ``` b\n"))
}

func TestRunLeavesTheREADMEAloneWithoutMarkers(t *testing.T) {
	t.Parallel()

	dir := t.TempDir()
	readme, report := filepath.Join(dir, "README.md"), filepath.Join(dir, "report.txt")

	require.NoError(t, os.WriteFile(readme, []byte("# Perf\n"), 0o644))
	require.NoError(t, os.WriteFile(report, []byte("table\n"), 0o644))

	err := run(readme, report)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "no markers"), err)

	content, err := os.ReadFile(readme)
	require.NoError(t, err)
	assert.Equal(t, "# Perf\n", string(content))
}

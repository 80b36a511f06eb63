package profilepaths_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"runtime/pprof"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/talos-ccm/talos-ccm/internal/profilepaths"
)

// strings returns a profile's string table.
func stringTable(t *testing.T, profile []byte) []string {
	t.Helper()

	zr, err := gzip.NewReader(bytes.NewReader(profile))
	require.NoError(t, err)

	raw, err := io.ReadAll(zr)
	require.NoError(t, err)

	var out []string

	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		require.GreaterOrEqual(t, n, 0)

		m := protowire.ConsumeFieldValue(num, typ, raw[n:])
		require.GreaterOrEqual(t, m, 0)

		if num == 6 {
			s, _ := protowire.ConsumeString(raw[n:])
			out = append(out, s)
		}

		raw = raw[n+m:]
	}

	return out
}

// TestRewrite: a heap profile of this test binary names the binary and its sources by absolute paths; once
// rewritten it names none, and keeps every other string in its place.
func TestRewrite(t *testing.T) {
	t.Parallel()

	var buf bytes.Buffer
	require.NoError(t, pprof.Lookup("heap").WriteTo(&buf, 0))

	before := stringTable(t, buf.Bytes())
	require.True(t, hasAbsolute(before), "a profile of a test binary names its path")

	rewritten, err := profilepaths.Rewrite(buf.Bytes(), profilepaths.Base)
	require.NoError(t, err)

	after := stringTable(t, rewritten)
	require.Len(t, after, len(before))
	require.False(t, hasAbsolute(after), "%v", after)

	for i, s := range before {
		if strings.HasPrefix(s, "/") {
			require.Equal(t, profilepaths.Base(s), after[i])
		} else {
			require.Equal(t, s, after[i])
		}
	}
}

func hasAbsolute(table []string) bool {
	for _, s := range table {
		if strings.HasPrefix(s, "/") {
			return true
		}
	}

	return false
}

func TestRewriteRefusesWhatIsNoProfile(t *testing.T) {
	t.Parallel()

	_, err := profilepaths.Rewrite([]byte("not a profile"), profilepaths.Base)
	require.Error(t, err)
}

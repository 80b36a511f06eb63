package version

import (
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestResolve(t *testing.T) {
	t.Parallel()

	vcs := func(revision, modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: revision}, {Key: "vcs.modified", Value: modified}}
	}

	for _, tc := range []struct {
		name                    string
		stampedVersion, commit  string
		bi                      *debug.BuildInfo
		wantVersion, wantCommit string
	}{
		{name: "nothing known", wantVersion: "devel", wantCommit: "unknown"},
		{
			name:           "stamped wins",
			stampedVersion: "v1.2.3", commit: "abc123",
			bi:          &debug.BuildInfo{Main: debug.Module{Version: "v0.0.1"}, Settings: vcs("fff", "false")},
			wantVersion: "v1.2.3", wantCommit: "abc123",
		},
		{
			name:        "module version and clean checkout",
			bi:          &debug.BuildInfo{Main: debug.Module{Version: "v0.4.0"}, Settings: vcs("0123abc", "false")},
			wantVersion: "v0.4.0", wantCommit: "0123abc",
		},
		{
			name:        "devel build of a dirty checkout",
			bi:          &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("0123abc", "true")},
			wantVersion: "devel", wantCommit: "0123abc-dirty",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			info := resolve(tc.stampedVersion, tc.commit, tc.bi)
			assert.Equal(t, tc.wantVersion, info.Version)
			assert.Equal(t, tc.wantCommit, info.Commit)
			assert.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, info.Platform)
			assert.NotEmpty(t, info.GoVersion)
			assert.Contains(t, info.String(), tc.wantVersion)
		})
	}
}

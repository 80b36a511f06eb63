// Package version says which build of talos-ccm is running: `talos-ccm --version` and `ccmctl version`
// print it, and the logs carry it.
//
// The image build stamps the version and the commit with the linker:
//
//	go build -ldflags "-X github.com/talos-ccm/talos-ccm/internal/version.version=v1.2.3 \
//	  -X github.com/talos-ccm/talos-ccm/internal/version.commit=0123abc" ./cmd/...
//
// Without them, they come from the build information Go records in every binary: the module version
// (`go install ...@v1.2.3`) and the VCS revision of a build in a checkout.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Set by the linker (-X); empty means unknown.
var (
	version string
	commit  string
)

// Info describes a build.
type Info struct {
	// Version is the release (v1.2.3), or "devel" when unknown.
	Version string
	// Commit is the VCS revision, with "-dirty" when the tree had changes; "unknown" when not recorded.
	Commit string
	// GoVersion is the Go toolchain that built the binary.
	GoVersion string
	// Platform is GOOS/GOARCH.
	Platform string
}

// Get returns the running binary's build information.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()

	return resolve(version, commit, bi)
}

// resolve prefers the linker's values, then the build information, then the placeholders.
func resolve(stampedVersion, stampedCommit string, bi *debug.BuildInfo) Info {
	info := Info{
		Version:   stampedVersion,
		Commit:    stampedCommit,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}

	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}

		// A build inside the main module's checkout reports "(devel)"; only a real module version counts.
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}

		if info.Commit == "" {
			info.Commit = vcsCommit(bi.Settings)
		}
	}

	if info.Version == "" {
		info.Version = "devel"
	}

	if info.Commit == "" {
		info.Commit = "unknown"
	}

	return info
}

// vcsCommit reads the revision that `go build` records from a checkout (not with -buildvcs=false).
func vcsCommit(settings []debug.BuildSetting) string {
	var revision, modified string

	for _, s := range settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}

	if revision != "" && modified == "true" {
		revision += "-dirty"
	}

	return revision
}

// String is what the commands print after their name: "v1.2.3 (commit 0123abc, go1.26.2, linux/amd64)".
func (i Info) String() string {
	return fmt.Sprintf("%s (commit %s, %s, %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}

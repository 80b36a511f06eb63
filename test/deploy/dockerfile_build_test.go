package deploy_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Build arguments the tests pass, as a release build would (`docker build --build-arg VERSION=...`).
const (
	stampedVersion = "v9.8.7-test"
	stampedCommit  = "0123456789abcdef0123456789abcdef01234567"
)

// versionLine is what `talos-ccm --version` and `ccmctl version` print.
var versionLine = regexp.MustCompile(`^(talos-ccm|ccmctl) (\S+) \(commit (\S+), (go\S+), (\S+/\S+)\)\n$`)

var (
	// runMountFlags are the flags of a RUN instruction before its command (--mount=..., --network=...).
	runMountFlags = regexp.MustCompile(`^(--[a-z]+=\S+\s+)+`)
	// absoluteOutput finds an absolute -o path, which the replay moves under its temporary root.
	absoluteOutput = regexp.MustCompile(`(^|\s)-o[ =](/\S*)`)
	// ldflagsX finds the -X settings of a go build's -ldflags.
	ldflagsX = regexp.MustCompile(`-X[ =]?([A-Za-z0-9_./-]+)\.([A-Za-z0-9_]+)=`)
)

// dockerBuildReplay is the state of a replayed build stage: a root directory standing for the stage's
// file system, its working directory and environment.
type dockerBuildReplay struct {
	root, repo, workdir string
	env                 map[string]string
}

// hostPath maps a path of the stage's file system to the replay's root.
func (r *dockerBuildReplay) hostPath(p string) string {
	if !path.IsAbs(p) {
		p = path.Join(r.workdir, p)
	}

	return filepath.Join(r.root, filepath.FromSlash(p))
}

// unquote strips the quotes of a Dockerfile value.
func unquote(v string) string {
	if len(v) >= 2 && (v[0] == '"' && v[len(v)-1] == '"' || v[0] == '\'' && v[len(v)-1] == '\'') {
		return v[1 : len(v)-1]
	}

	return v
}

// copyIntoStage does what COPY SRC... DEST does with the build context (the repository) and returns the
// context paths it copied.
func (r *dockerBuildReplay) copyIntoStage(t *testing.T, args string) []string {
	t.Helper()

	var paths []string

	for _, f := range strings.Fields(args) {
		if strings.HasPrefix(f, "--") {
			require.False(t, strings.HasPrefix(f, "--from="), "a COPY --from in the build stage: %s", args)

			continue
		}

		paths = append(paths, f)
	}

	require.GreaterOrEqual(t, len(paths), 2, "COPY needs a source and a destination: %s", args)

	srcs, dest := paths[:len(paths)-1], paths[len(paths)-1]
	destIsDir := strings.HasSuffix(dest, "/") || len(srcs) > 1

	for _, src := range srcs {
		require.False(t, path.IsAbs(src) || strings.Contains(src, ".."), "COPY source %q outside the build context", src)

		from := filepath.Join(r.repo, filepath.FromSlash(src))
		info, err := os.Stat(from)
		require.NoError(t, err, "COPY %s: not in the build context", src)

		to := r.hostPath(dest)
		if !info.IsDir() && destIsDir {
			to = filepath.Join(to, filepath.Base(from))
		}

		if info.IsDir() {
			// A directory's contents, as COPY does.
			require.NoError(t, os.CopyFS(to, os.DirFS(from)), "COPY %s %s", src, dest)

			continue
		}

		data, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.MkdirAll(filepath.Dir(to), 0o755))
		require.NoError(t, os.WriteFile(to, data, 0o644))
	}

	return srcs
}

// environ is the environment a RUN command sees: the stage's ENV and ARG values over this machine's Go
// caches (the image build has its own, mounted as caches), and nothing of this machine's Go settings.
func (r *dockerBuildReplay) environ() []string {
	var env []string

	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GO") && k != "GOCACHE" && k != "GOMODCACHE" && k != "GOPATH" && k != "GOPROXY" && k != "GOTOOLCHAIN" ||
			k == "CGO_ENABLED" || k == "KUBEBUILDER_ASSETS" {
			continue
		}

		env = append(env, kv)
	}

	for k, v := range r.env {
		env = append(env, k+"="+v)
	}

	return env
}

// replayBuildStage runs the build stage of the Dockerfile without Docker: an empty directory gets exactly
// what the stage COPYs from the build context, then the stage's go commands run there with its ENV, its
// ARGs (buildArgs win over their defaults) and its flags, writing under the replay's root. It returns the
// replay and the context paths copied.
func replayBuildStage(t *testing.T, stage dockerStage, buildArgs map[string]string) (*dockerBuildReplay, []string) {
	t.Helper()

	r := &dockerBuildReplay{root: t.TempDir(), repo: repoRoot(t), workdir: "/", env: map[string]string{}}

	var copied []string

	for _, ins := range stage.instructions {
		switch ins.keyword {
		case "WORKDIR":
			r.workdir = path.Join(r.workdir, unquote(ins.args))
			require.NoError(t, os.MkdirAll(r.hostPath("."), 0o755))
		case "ENV":
			for _, kv := range strings.Fields(ins.args) {
				k, v, ok := strings.Cut(kv, "=")
				require.True(t, ok, "ENV in the KEY=VALUE form: %s", ins.args)

				r.env[k] = unquote(v)
			}
		case "ARG":
			k, v, _ := strings.Cut(ins.args, "=")
			if given, ok := buildArgs[k]; ok {
				v = given
			}

			r.env[k] = unquote(v)
		case "COPY":
			copied = append(copied, r.copyIntoStage(t, ins.args)...)
		case "RUN":
			command := runMountFlags.ReplaceAllString(ins.args, "")
			if !strings.HasPrefix(command, "go ") {
				t.Logf("not replayed (not a go command): RUN %s", command)

				continue
			}

			command = absoluteOutput.ReplaceAllStringFunc(command, func(m string) string {
				sub := absoluteOutput.FindStringSubmatch(m)
				out := r.hostPath(sub[2])

				if strings.HasSuffix(sub[2], "/") {
					out += string(filepath.Separator)
				}

				return sub[1] + "-o " + out
			})

			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
			cmd := exec.CommandContext(ctx, "sh", "-c", command)
			cmd.Dir = r.hostPath(".")
			cmd.Env = r.environ()

			started := time.Now()
			output, err := cmd.CombinedOutput()

			cancel()
			require.NoError(t, err, "RUN %s:\n%s", command, output)
			t.Logf("replayed in %s: RUN %s", time.Since(started).Round(time.Second), command)
		}
	}

	return r, copied
}

// TestDockerfileBuildStageBuilds replays the image's build stage (see replayBuildStage): the sources it
// copies are enough to build every binary of the image, the binaries are static, and the build arguments
// VERSION and COMMIT reach `talos-ccm --version` and `ccmctl version` through the stage's -ldflags.
func TestDockerfileBuildStageBuilds(t *testing.T) {
	t.Parallel()

	stages := parseDockerfile(t, string(readFile(t, "Dockerfile")))

	var commands []string

	entries, err := os.ReadDir(filepath.Join(repoRoot(t), "cmd"))
	require.NoError(t, err)

	for _, e := range entries {
		if e.IsDir() {
			commands = append(commands, e.Name())
		}
	}

	replayed := 0

	for _, stage := range stages[:len(stages)-1] {
		binaries := builtBinaries(t, stage, commands)
		if len(binaries) == 0 {
			continue
		}

		// The -X settings name variables of internal/version: a typo there sets nothing and fails silently.
		for _, ins := range stage.instructions {
			for _, m := range ldflagsX.FindAllStringSubmatch(ins.args, -1) {
				assert.Equal(t, "github.com/talos-ccm/talos-ccm/internal/version", m[1], "-X %s.%s", m[1], m[2])
				assert.Contains(t, []string{"version", "commit"}, m[2], "-X %s.%s", m[1], m[2])
			}
		}

		r, copied := replayBuildStage(t, stage, map[string]string{"VERSION": stampedVersion, "COMMIT": stampedCommit})
		t.Logf("stage %q copies %v", stage.name, copied)

		for _, bin := range binaries {
			host := r.hostPath(bin)

			f, err := elf.Open(host)
			require.NoError(t, err, "%s was not built", bin)

			for _, p := range f.Progs {
				assert.NotEqual(t, elf.PT_INTERP, p.Type, "%s is dynamically linked: it cannot run on a distroless static base", bin)
			}

			require.NoError(t, f.Close())

			args := map[string][]string{"talos-ccm": {"--version"}, "ccmctl": {"version"}}[path.Base(bin)]
			if args == nil {
				continue
			}

			out, err := exec.Command(host, args...).Output()
			require.NoError(t, err, "%s %v", bin, args)

			m := versionLine.FindStringSubmatch(string(out))
			require.NotNil(t, m, "%s %v printed %q", bin, args, out)
			assert.Equal(t, path.Base(bin), m[1])
			assert.Equal(t, stampedVersion, m[2], "the VERSION build argument")
			assert.Equal(t, stampedCommit, m[3], "the COMMIT build argument")
		}

		replayed++
	}

	require.Positive(t, replayed, "no build stage replayed")
}

// TestVersionCommands builds talos-ccm and ccmctl as `go build` does in a checkout, without stamping:
// both print the version line, with the version and commit from Go's build information (or "devel" and
// "unknown" without it) and the Go version.
func TestVersionCommands(t *testing.T) {
	t.Parallel()

	ccmctl := goBuild(t, "cmd/ccmctl", t.TempDir())

	for _, tc := range []struct {
		binary string
		args   []string
	}{
		{binary: talosCCMBinary(t), args: []string{"--version"}},
		{binary: ccmctl, args: []string{"version"}},
	} {
		out, err := exec.Command(tc.binary, tc.args...).Output()
		require.NoError(t, err, "%s %v", tc.binary, tc.args)

		m := versionLine.FindStringSubmatch(string(out))
		require.NotNil(t, m, "%s %v printed %q", tc.binary, tc.args, out)
		assert.Equal(t, filepath.Base(tc.binary), m[1])
		assert.NotEmpty(t, m[2])
		assert.NotEmpty(t, m[3])
	}
}

// TestDockerBuild builds the image with Docker and runs both commands in it, when a Docker engine answers;
// otherwise it is skipped (TestDockerfileBuildStageBuilds replays the build stage without one).
func TestDockerBuild(t *testing.T) {
	t.Parallel()

	docker, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("no docker command: the image build is replayed without Docker by TestDockerfileBuildStageBuilds")
	}

	if out, err := exec.CommandContext(t.Context(), docker, "info").CombinedOutput(); err != nil {
		t.Skipf("no Docker engine answers (docker info: %v: %s): the image build is replayed without Docker by TestDockerfileBuildStageBuilds",
			err, lastLines(string(out), 1))
	}

	suffix := make([]byte, 4)
	_, err = rand.Read(suffix)
	require.NoError(t, err)

	image := "talos-ccm-test:" + hex.EncodeToString(suffix)

	build := exec.CommandContext(t.Context(), docker, "build", "--build-arg", "VERSION="+stampedVersion,
		"--build-arg", "COMMIT="+stampedCommit, "-t", image, ".")
	build.Dir = repoRoot(t)

	out, err := build.CombinedOutput()
	require.NoError(t, err, "docker build: %s", out)

	t.Cleanup(func() {
		exec.Command(docker, "image", "rm", "-f", image).Run() //nolint:errcheck
	})

	for _, args := range [][]string{
		{"run", "--rm", image, "--version"},
		{"run", "--rm", "--entrypoint", "/usr/local/bin/ccmctl", image, "version"},
	} {
		var stdout bytes.Buffer

		cmd := exec.CommandContext(t.Context(), docker, args...)
		cmd.Stdout = &stdout
		require.NoError(t, cmd.Run(), "docker %v", args)

		m := versionLine.FindStringSubmatch(stdout.String())
		require.NotNil(t, m, "docker %v printed %q", args, stdout.String())
		assert.Equal(t, stampedVersion, m[2])
		assert.Equal(t, stampedCommit, m[3])
	}

	// The image runs as the non-root user of the Dockerfile.
	var user bytes.Buffer

	inspect := exec.CommandContext(t.Context(), docker, "image", "inspect", "--format", "{{.Config.User}}", image)
	inspect.Stdout = &user
	require.NoError(t, inspect.Run())
	assert.Equal(t, "65532:65532", strings.TrimSpace(user.String()))
}

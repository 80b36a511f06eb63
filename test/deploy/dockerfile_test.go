package deploy_test

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testOnlyCommands are commands under cmd/ that the image does not ship.
var testOnlyCommands = map[string]string{
	"talos-sim": "the simulated Talos fleet of the tests and the demo",
}

// dockerInstruction is one instruction of a Dockerfile, continuation lines joined.
type dockerInstruction struct {
	keyword string
	args    string
}

// dockerStage is one FROM and the instructions after it.
type dockerStage struct {
	name         string
	from         string
	instructions []dockerInstruction
}

// parseDockerfile splits a Dockerfile into stages (enough of the syntax for the checks below: comments,
// line continuations, keywords, no heredocs).
func parseDockerfile(t *testing.T, data string) []dockerStage {
	t.Helper()

	var (
		stages  []dockerStage
		current strings.Builder
		lines   []string
	)

	for line := range strings.SplitSeq(data, "\n") {
		trimmed := strings.TrimSpace(line)
		if current.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}

		if strings.HasSuffix(trimmed, "\\") {
			current.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")

			continue
		}

		current.WriteString(trimmed)
		lines = append(lines, current.String())
		current.Reset()
	}

	require.Zero(t, current.Len(), "the Dockerfile ends in a line continuation")

	for _, line := range lines {
		keyword, args, _ := strings.Cut(line, " ")
		ins := dockerInstruction{keyword: strings.ToUpper(keyword), args: strings.TrimSpace(args)}

		if ins.keyword == "FROM" {
			fields := strings.Fields(ins.args)
			fields = slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, "--") })
			require.NotEmpty(t, fields, "FROM without an image")

			stage := dockerStage{from: fields[0]}
			if len(fields) == 3 && strings.EqualFold(fields[1], "AS") {
				stage.name = fields[2]
			}

			stages = append(stages, stage)

			continue
		}

		if len(stages) == 0 {
			require.Contains(t, []string{"ARG"}, ins.keyword, "only ARG may come before the first FROM")

			continue
		}

		stages[len(stages)-1].instructions = append(stages[len(stages)-1].instructions, ins)
	}

	return stages
}

var (
	// goBuildCommand finds `go build` invocations in a RUN instruction.
	goBuildCommand = regexp.MustCompile(`go build\b[^;&|]*`)
	// outputFlag finds the -o argument of a go build.
	outputFlag = regexp.MustCompile(`(?:^|\s)-o[ =](\S+)`)
	// cgoDisabled finds CGO_ENABLED=0 in an ENV, ARG or RUN instruction.
	cgoDisabled = regexp.MustCompile(`(^|\s)CGO_ENABLED=0(\s|$)`)
	// packageArg finds the ./cmd/NAME packages of a go build.
	packageArg = regexp.MustCompile(`\./cmd/([A-Za-z0-9_.-]+)`)
)

// builtBinaries returns the paths of the binaries a build stage writes with go build.
func builtBinaries(t *testing.T, stage dockerStage, commands []string) []string {
	t.Helper()

	var out []string

	for _, ins := range stage.instructions {
		if ins.keyword != "RUN" {
			continue
		}

		for _, build := range goBuildCommand.FindAllString(ins.args, -1) {
			o := outputFlag.FindStringSubmatch(build)
			require.NotNil(t, o, "go build without -o in the Dockerfile: %s", build)

			pkgs := packageArg.FindAllStringSubmatch(build, -1)
			require.NotEmpty(t, pkgs, "go build of no ./cmd package: %s", build)

			for _, pkg := range pkgs {
				names := []string{pkg[1]}
				if pkg[1] == "..." {
					names = commands
				}

				for _, name := range names {
					if strings.HasSuffix(o[1], "/") {
						out = append(out, o[1]+name)
					} else {
						require.Len(t, pkgs, 1, "go build -o FILE of several packages: %s", build)
						out = append(out, o[1])
					}
				}
			}
		}
	}

	return out
}

// TestDockerfile checks the image recipe: a build stage and a runtime stage, static binaries
// (CGO_ENABLED=0), a non-root user, and every command built (all of cmd/ but the test tools) copied into
// the runtime stage.
func TestDockerfile(t *testing.T) {
	t.Parallel()

	root := repoRoot(t)
	stages := parseDockerfile(t, string(readFile(t, "Dockerfile")))

	require.GreaterOrEqual(t, len(stages), 2, "a multi-stage build: the toolchain stays out of the image")

	final := stages[len(stages)-1]

	var commands []string

	entries, err := os.ReadDir(filepath.Join(root, "cmd"))
	require.NoError(t, err)

	for _, e := range entries {
		if e.IsDir() {
			commands = append(commands, e.Name())
		}
	}

	// Binaries built per stage name (and index, for COPY --from=N).
	built := map[string][]string{}

	for i, stage := range stages[:len(stages)-1] {
		binaries := builtBinaries(t, stage, commands)
		if len(binaries) == 0 {
			continue
		}

		cgoOff := slices.ContainsFunc(stage.instructions, func(ins dockerInstruction) bool {
			return (ins.keyword == "ENV" || ins.keyword == "RUN" || ins.keyword == "ARG") &&
				cgoDisabled.MatchString(ins.args)
		})
		assert.True(t, cgoOff, "stage %q builds with CGO_ENABLED=0, for static binaries on a distroless base", stage.name)

		built[stage.name] = binaries
		built[strconv.Itoa(i)] = binaries
	}

	require.NotEmpty(t, built, "no stage builds a binary")

	var (
		copied []string
		user   string
	)

	for _, ins := range final.instructions {
		switch ins.keyword {
		case "USER":
			user = ins.args
		case "COPY":
			fields := strings.Fields(ins.args)

			var from string

			var paths []string

			for _, f := range fields {
				if v, ok := strings.CutPrefix(f, "--from="); ok {
					from = v
				} else if !strings.HasPrefix(f, "--") {
					paths = append(paths, f)
				}
			}

			if from == "" || len(paths) < 2 {
				continue
			}

			for _, src := range paths[:len(paths)-1] {
				for _, bin := range built[from] {
					if bin == src || strings.HasPrefix(bin, strings.TrimSuffix(src, "/")+"/") {
						copied = append(copied, bin)
					}
				}
			}
		}
	}

	// A non-root user, numeric so that Kubernetes' runAsNonRoot can verify it.
	require.NotEmpty(t, user, "the runtime stage sets a USER")

	uid, _, _ := strings.Cut(user, ":")
	assert.Regexp(t, `^[0-9]+$`, uid, "USER is numeric, for runAsNonRoot")
	assert.NotEqual(t, "0", uid, "USER is not root")

	var allBuilt []string
	for _, binaries := range built {
		allBuilt = append(allBuilt, binaries...)
	}

	for _, bin := range allBuilt {
		assert.Contains(t, copied, bin, "%s is built but not copied into the image", bin)
	}

	names := map[string]bool{}
	for _, bin := range copied {
		names[path.Base(bin)] = true
	}

	for _, cmd := range commands {
		if reason, ok := testOnlyCommands[cmd]; ok {
			assert.False(t, names[cmd], "cmd/%s is %s, not for the image", cmd, reason)

			continue
		}

		assert.True(t, names[cmd], "cmd/%s is not built and copied into the image", cmd)
	}

	// The chart mounts the state volume at the image's working directory.
	workdir := ""

	for _, ins := range final.instructions {
		if ins.keyword == "WORKDIR" {
			workdir = ins.args
		}
	}

	assert.Equal(t, argMap(renderedArgs(t))["--state-dir"], workdir,
		"the chart's state directory is the image's WORKDIR, where ccmctl finds the API socket")
}

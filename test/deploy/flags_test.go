package deploy_test

import (
	"bytes"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// talosCCM caches the talos-ccm binary built for the package's tests.
var talosCCM struct {
	once sync.Once
	path string
}

// talosCCMBinary builds cmd/talos-ccm once for the package.
func talosCCMBinary(t *testing.T) string {
	t.Helper()

	talosCCM.once.Do(func() {
		// Not t.TempDir: the binary outlives the test that happens to build it.
		talosCCM.path = goBuild(t, "cmd/talos-ccm", sharedTempDir(t))
	})

	require.NotEmpty(t, talosCCM.path, "talos-ccm was not built")

	return talosCCM.path
}

// flagLine matches a flag in pflag's usage: "  -x, --name type   description" or "      --name ...".
var flagLine = regexp.MustCompile(`^\s+(?:-[A-Za-z0-9], )?--([a-z0-9][a-z0-9-]*)`)

// talosCCMFlags returns the names of the flags talos-ccm accepts, from its --help.
func talosCCMFlags(t *testing.T) []string {
	t.Helper()

	out, _ := exec.Command(talosCCMBinary(t), "--help").CombinedOutput()

	var flags []string

	for line := range strings.SplitSeq(string(out), "\n") {
		if m := flagLine.FindStringSubmatch(line); m != nil {
			flags = append(flags, m[1])
		}
	}

	require.Contains(t, flags, "controllers", "talos-ccm --help lists no flags: %s", out)

	return flags
}

// renderedArgs renders the chart with valuesFiles and returns the talos-ccm container's arguments.
func renderedArgs(t *testing.T, valuesFiles ...string) []string {
	t.Helper()

	objects := render(t, "talos-ccm", "kube-system", valuesFiles)

	return podSpec(t, objects).Spec.Containers[0].Args
}

// TestRenderedFlagsAreAccepted gives talos-ccm the arguments the chart renders, with default and
// example values, followed by --help: talos-ccm parses every argument before it reaches --help and
// stops there, so an unknown flag or a value it cannot parse (which would crash the pod at start)
// fails this test, and nothing is started.
func TestRenderedFlagsAreAccepted(t *testing.T) {
	t.Parallel()

	binary := talosCCMBinary(t)
	known := talosCCMFlags(t)

	for _, values := range append([]string{""}, exampleValues...) {
		name := values
		if name == "" {
			name = "default values"
		}

		t.Run(name, func(t *testing.T) {
			t.Parallel()

			var files []string
			if values != "" {
				files = []string{values}
			}

			args := renderedArgs(t, files...)
			require.NotEmpty(t, args)

			for _, arg := range args {
				flag, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
				assert.Contains(t, known, flag, "the chart renders %q, which talos-ccm does not accept", arg)
			}

			var output bytes.Buffer

			cmd := exec.Command(binary, append(slices.Clone(args), "--help")...)
			cmd.Stdout = &output
			cmd.Stderr = &output

			// talos-ccm exits non-zero after printing the usage; what matters is why it stopped.
			_ = cmd.Run()

			assert.Contains(t, output.String(), "help requested",
				"talos-ccm stopped before reaching --help on the chart's arguments %q: %s", args, lastLines(output.String(), 3))
		})
	}
}

// TestEveryFlagHasAValue checks that the chart covers talos-ccm's flags: each one is rendered with the
// default or with the example values (ci/full-values.yaml sets every value), so none can only be
// reached through extraArgs. A flag added to talos-ccm fails this test until the chart has a value for
// it: a line in values.yaml, one in the "talos-ccm.args" template, and a setting in ci/full-values.yaml.
func TestEveryFlagHasAValue(t *testing.T) {
	t.Parallel()

	rendered := map[string]bool{}

	for _, values := range append([]string{""}, exampleValues...) {
		var files []string
		if values != "" {
			files = []string{values}
		}

		for _, arg := range renderedArgs(t, files...) {
			flag, _, _ := strings.Cut(strings.TrimPrefix(arg, "--"), "=")
			rendered[flag] = true
		}
	}

	for _, flag := range talosCCMFlags(t) {
		// Commands of their own, not settings.
		if flag == "help" || flag == "version" {
			continue
		}

		assert.True(t, rendered[flag], "talos-ccm's --%s is not rendered by the chart with any example values", flag)
	}
}

// sharedTempDir returns a directory shared by the package's tests.
func sharedTempDir(t *testing.T) string {
	t.Helper()

	sharedTemp.once.Do(func() {
		sharedTemp.dir, sharedTemp.err = mkdirTemp()
	})

	require.NoError(t, sharedTemp.err)

	return sharedTemp.dir
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")

	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

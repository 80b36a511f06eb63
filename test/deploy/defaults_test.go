package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// helpDefault matches a flag and the default pflag prints for it: `--name type ... (default 64)`.
var helpDefault = regexp.MustCompile(`^\s+(?:-[A-Za-z0-9], )?--([a-z0-9][a-z0-9-]*).*\(default ([^:;)][^;)]*)\)\s*$`)

// valuesFlag matches the first line of a values.yaml comment of the chart that names a flag:
// `# -- --name: what it does`; the comment goes on over the lines that follow it with "#", and may state
// the default: `(default 64)`, `(default 64; ...)`.
var (
	valuesFlag    = regexp.MustCompile(`^\s*# -- --([a-z0-9-]+)`)
	valuesDefault = regexp.MustCompile(`\(default ([^:;)][^;)]*)[;)]`)
)

// statedDefaults returns the defaults the comments of values.yaml state, by flag.
func statedDefaults(values string) map[string]string {
	stated := map[string]string{}

	var flag, comment string

	flush := func() {
		if m := valuesDefault.FindStringSubmatch(comment); flag != "" && m != nil {
			stated[flag] = strings.TrimSpace(m[1])
		}

		flag, comment = "", ""
	}

	for line := range strings.SplitSeq(values, "\n") {
		if m := valuesFlag.FindStringSubmatch(line); m != nil {
			flush()

			flag, comment = m[1], line

			continue
		}

		if trimmed := strings.TrimSpace(line); flag != "" && strings.HasPrefix(trimmed, "#") && !strings.HasPrefix(trimmed, "# --") {
			comment += " " + strings.TrimSpace(strings.TrimPrefix(trimmed, "#"))

			continue
		}

		flush()
	}

	flush()

	return stated
}

// TestChartDefaultsAreTalosCCMs: the defaults the chart's values.yaml states for talos-ccm's flags are the
// ones talos-ccm --help shows, which come from the embedding API's DefaultOptions (pkg/ccm): a default
// changed there fails this test until the chart says the same.
func TestChartDefaultsAreTalosCCMs(t *testing.T) {
	t.Parallel()

	// --help exits with an error status once it printed the usage.
	out, _ := exec.CommandContext(t.Context(), talosCCMBinary(t), "--help").CombinedOutput()

	help := map[string]string{}

	for line := range strings.SplitSeq(string(out), "\n") {
		if m := helpDefault.FindStringSubmatch(line); m != nil {
			help[m[1]] = strings.Trim(m[2], `"`)
		}
	}

	require.Equal(t, "64", help["concurrency"], "talos-ccm --help shows no defaults: %s", out)

	values, err := os.ReadFile(filepath.Join(repoRoot(t), chartDir, "values.yaml"))
	require.NoError(t, err)

	checked := 0

	for flag, stated := range statedDefaults(string(values)) {
		shown, ok := help[flag]
		if !ok {
			continue // A default that is no flag's value, such as one read from the config file.
		}

		checked++

		assert.True(t, sameDefault(stated, shown), "values.yaml states --%s defaults to %q, talos-ccm --help to %q", flag, stated, shown)
	}

	assert.GreaterOrEqual(t, checked, 5, "values.yaml states the defaults of few flags: the pattern no longer matches its comments")
}

// sameDefault compares two spellings of a default: durations by their value ("5m" and "5m0s").
func sameDefault(a, b string) bool {
	da, errA := time.ParseDuration(a)
	db, errB := time.ParseDuration(b)

	if errA == nil && errB == nil {
		return da == db
	}

	return a == b
}

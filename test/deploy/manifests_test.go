package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// renderedManifests are the files `make manifests` writes into deploy/manifests.
var renderedManifests = []string{"talos-ccm.yaml", "talos-ccm-daemonset.yaml"}

// TestManifestsUpToDate renders the manifests as `make manifests` does, into a temporary directory,
// and compares them with the checked-in ones.
func TestManifestsUpToDate(t *testing.T) {
	t.Parallel()

	root := repoRoot(t)
	dir := t.TempDir()

	// hack/manifests.sh finds helm through hack/helm.sh; hand it the one the tests already use.
	cmd := exec.Command(filepath.Join(root, "hack", "manifests.sh"), dir)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TALOS_CCM_HELM="+helmBinary(t))

	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "hack/manifests.sh: %s", out)

	for _, name := range renderedManifests {
		want, err := os.ReadFile(filepath.Join(dir, name))
		require.NoError(t, err)

		got := readFile(t, filepath.Join("deploy", "manifests", name))

		if diff := firstDifference(string(want), string(got)); diff != "" {
			t.Errorf("deploy/manifests/%s is out of date, run `make manifests`: %s", name, diff)
		}
	}

	entries, err := os.ReadDir(filepath.Join(root, "deploy", "manifests"))
	require.NoError(t, err)

	for _, e := range entries {
		assert.Contains(t, renderedManifests, e.Name(), "deploy/manifests holds only rendered files")
	}
}

// firstDifference describes the first line where got differs from want, or returns "".
func firstDifference(want, got string) string {
	if want == got {
		return ""
	}

	wantLines, gotLines := strings.Split(want, "\n"), strings.Split(got, "\n")

	for i := range max(len(wantLines), len(gotLines)) {
		var w, g string

		if i < len(wantLines) {
			w = wantLines[i]
		}

		if i < len(gotLines) {
			g = gotLines[i]
		}

		if w != g {
			return fmt.Sprintf("line %d is %q, want %q", i+1, g, w)
		}
	}

	return "they differ"
}

package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
)

// modulePath is the main module's path, which tells the repository's go.mod apart from the
// envtest helper module's.
const modulePath = "github.com/talos-ccm/talos-ccm"

// assetsEnv is the variable controller-runtime's envtest reads the binaries' directory from.
const assetsEnv = "KUBEBUILDER_ASSETS"

// assets caches the binaries' directory for the process: every test of a package asks for it,
// and hack/envtest.sh needs to run at most once.
var assets struct {
	mu  sync.Mutex
	dir string
}

// AssetsDir returns the directory holding the kube-apiserver and etcd binaries: KUBEBUILDER_ASSETS
// when it holds both, otherwise the directory printed by hack/envtest.sh, which builds them from
// Go modules on first use (several minutes) and reuses them afterwards.
func AssetsDir() (string, error) {
	assets.mu.Lock()
	defer assets.mu.Unlock()

	if assets.dir != "" {
		return assets.dir, nil
	}

	if dir := os.Getenv(assetsEnv); dir != "" && hasBinaries(dir) {
		assets.dir = dir

		return dir, nil
	}

	root, err := repoRoot()
	if err != nil {
		return "", err
	}

	var stdout bytes.Buffer

	cmd := exec.Command(filepath.Join(root, "hack", "envtest.sh"))
	cmd.Dir = root
	cmd.Stdout = &stdout
	// The script reports its progress, and a cold build is long enough to deserve it.
	cmd.Stderr = os.Stderr

	if err = cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to run hack/envtest.sh: %w", err)
	}

	dir := strings.TrimSpace(stdout.String())
	if !hasBinaries(dir) {
		return "", fmt.Errorf("failed to find kube-apiserver and etcd in %q printed by hack/envtest.sh", dir)
	}

	assets.dir = dir

	return dir, nil
}

// hasBinaries reports whether dir holds both control plane executables.
func hasBinaries(dir string) bool {
	for _, name := range []string{"kube-apiserver", "etcd"} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			return false
		}
	}

	return true
}

// repoRoot finds the repository root: the directory of the main module's go.mod, searched upwards
// from this source file (known unless built with -trimpath), then from the working directory.
func repoRoot() (string, error) {
	var starts []string

	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		starts = append(starts, filepath.Dir(file))
	}

	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}

	for _, start := range starts {
		if root, ok := findModuleRoot(start); ok {
			return root, nil
		}
	}

	return "", errors.New("failed to find the repository root: no go.mod of module " + modulePath +
		" above the test's source or working directory; set " + assetsEnv + " instead")
}

// findModuleRoot walks up from dir to the directory whose go.mod declares modulePath.
func findModuleRoot(dir string) (string, bool) {
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && declaresModule(data, modulePath) {
			return dir, true
		}

		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}

		dir = parent
	}
}

// declaresModule reports whether the go.mod contents declare the module path (unquoted, as this
// repository writes it).
func declaresModule(gomod []byte, path string) bool {
	for line := range strings.Lines(string(gomod)) {
		fields := strings.Fields(line)
		if len(fields) >= 2 && fields[0] == "module" {
			return fields[1] == path
		}
	}

	return false
}

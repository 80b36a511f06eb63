//go:build faults

package faults_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// env is the control plane the tests share; each test uses Nodes of its own name prefix and deletes them at
// the end. A test that restarts the apiserver starts a control plane of its own.
var env *testenv.Env

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}

	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	e, stop, err := testenv.StartShared()
	if err != nil {
		return 1, err
	}

	defer stop()

	binDir, err := os.MkdirTemp("", "talos-ccm-faults")
	if err != nil {
		return 1, fmt.Errorf("failed to create the binary directory: %w", err)
	}

	defer os.RemoveAll(binDir) //nolint:errcheck

	env = e
	ccmBinDir = binDir

	return m.Run(), nil
}

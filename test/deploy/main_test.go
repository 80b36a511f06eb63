// Package deploy_test checks what installs talos-ccm in a cluster: the Helm chart (rendered and linted
// by Helm built from its Go module), the manifests rendered from it, the flags it passes, its RBAC
// proven on a real kube-apiserver, the Talos machine config patches and the Dockerfile.
//
// The tests that need a control plane share one, started on first use.
package deploy_test

import (
	"os"
	"sync"
	"testing"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// shared is the control plane of the package's tests, started by the first test that needs it.
var shared struct {
	once sync.Once
	env  *testenv.Env
	stop func()
	err  error
}

// controlPlane returns the shared control plane, starting it on first use, or fails the test.
func controlPlane(t testing.TB) *testenv.Env {
	t.Helper()

	shared.once.Do(func() {
		shared.env, shared.stop, shared.err = testenv.StartShared()
	})

	if shared.err != nil {
		t.Fatal(shared.err)
	}

	return shared.env
}

// sharedTemp is a directory for what the package's tests share (the talos-ccm binary), removed when
// they end.
var sharedTemp struct {
	once sync.Once
	dir  string
	err  error
}

func mkdirTemp() (string, error) {
	return os.MkdirTemp("", "talos-ccm-deploy-test-")
}

func TestMain(m *testing.M) {
	code := m.Run()

	if sharedTemp.dir != "" {
		os.RemoveAll(sharedTemp.dir) //nolint:errcheck
	}

	if shared.stop != nil {
		shared.stop()
	}

	os.Exit(code)
}

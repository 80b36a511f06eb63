// Package e2e_test runs talos-ccm end to end: a real kube-apiserver and etcd (envtest) and a simulated
// Talos fleet (talos-sim) speaking the real COSI gRPC protocol. The tests share one control plane and run
// one after another, each with its own Nodes, which it deletes at the end.
package e2e_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	e, stop, err := testenv.StartShared()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}

	env = e
	code := m.Run()

	stop()
	os.Exit(code)
}

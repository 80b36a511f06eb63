// Command controlplane runs the end-to-end tests' control plane (etcd and kube-apiserver, see
// internal/testenv) as a standalone process, for the demo and for manual runs:
//
//	go run ./test/controlplane --kubeconfig-out kubeconfig
//
// Once the apiserver serves, it writes an admin kubeconfig and prints one line,
// "control plane ready, kubeconfig: PATH", to stdout. SIGINT or SIGTERM stops etcd and
// kube-apiserver and removes their data; the exit code is 0 when they stopped cleanly. The parent
// process exiting (for example `go run` on SIGTERM) stops it the same way, unless
// --stop-with-parent=false.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "controlplane: %v\n", err)
		os.Exit(1)
	}
}

func run() error {
	kubeconfigOut := flag.String("kubeconfig-out", "", "path to write the admin kubeconfig to (required)")
	withParent := flag.Bool("stop-with-parent", true, "stop when the parent process exits")
	flag.Parse()

	if *kubeconfigOut == "" {
		return errors.New("--kubeconfig-out is required")
	}

	// Listen for the signals before starting anything, so that a stop request arriving during the
	// start is not lost: it stops the control plane as soon as it is up.
	ctx, stopSignals := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stopSignals()

	if *withParent {
		if err := stopWithParent(); err != nil {
			return err
		}
	}

	env, _, err := testenv.StartShared()
	if err != nil {
		return err
	}

	if err = env.WriteKubeconfig(*kubeconfigOut); err != nil {
		return errors.Join(err, env.Stop())
	}

	fmt.Printf("control plane ready, kubeconfig: %s\n", *kubeconfigOut)

	<-ctx.Done()

	// A second signal during the stop kills the process, as usual.
	stopSignals()

	fmt.Fprintln(os.Stderr, "controlplane: stopping etcd and kube-apiserver")

	return env.Stop()
}

// Command demo runs talos-ccm on this machine: a local control plane (kube-apiserver and etcd built from
// Go modules), a simulated Talos fleet whose kubelets register Nodes, and talos-ccm initializing them.
// It shows progress, then a table of the Nodes, and runs until Ctrl-C (or, with --exit-when-initialized,
// exits once every Node is initialized).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

type options struct {
	binDir              string
	workDir             string
	machines            int
	seed                int64
	timeout             time.Duration
	exitWhenInitialized bool
}

func main() {
	var opts options

	flag.StringVar(&opts.binDir, "bin", "bin", "directory with the talos-ccm and talos-sim binaries (make build)")
	flag.StringVar(&opts.workDir, "work-dir", ".demo", "directory for the kubeconfig, talosconfig, state and logs")
	flag.IntVar(&opts.machines, "machines", 50, "simulated Talos machines")
	flag.Int64Var(&opts.seed, "seed", 1, "seed of the generated fleet")
	flag.DurationVar(&opts.timeout, "timeout", 5*time.Minute, "with --exit-when-initialized: give up after this long")
	flag.BoolVar(&opts.exitWhenInitialized, "exit-when-initialized", false, "exit 0 once every Node is initialized (non-zero on timeout)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, opts)

	stop()

	if err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, opts options) error {
	workDir, err := filepath.Abs(opts.workDir)
	if err != nil {
		return err
	}

	if err = os.RemoveAll(workDir); err != nil {
		return fmt.Errorf("failed to clean %s: %w", workDir, err)
	}

	if err = os.MkdirAll(workDir, 0o755); err != nil {
		return fmt.Errorf("failed to create %s: %w", workDir, err)
	}

	step("starting the control plane (kube-apiserver and etcd; the first run builds them from Go modules, which takes several minutes)")

	cp, stopControlPlane, err := testenv.StartShared()
	if err != nil {
		return err
	}

	defer stopControlPlane()

	kubeconfig := filepath.Join(workDir, "kubeconfig")
	if err = cp.WriteKubeconfig(kubeconfig); err != nil {
		return err
	}

	talosconfig := filepath.Join(workDir, "talosconfig")

	step(fmt.Sprintf("starting talos-sim: %d simulated Talos machines whose kubelets join the cluster", opts.machines))

	sim, err := startProcess(filepath.Join(opts.binDir, "talos-sim"), filepath.Join(workDir, "talos-sim.log"),
		"--machines", fmt.Sprint(opts.machines),
		"--seed", fmt.Sprint(opts.seed),
		"--listen", "127.0.0.1:0",
		"--talosconfig-out", talosconfig,
		"--kubeconfig", kubeconfig,
		"--cluster-name", "demo",
	)
	if err != nil {
		return err
	}

	defer sim.stop()

	if err = waitForFile(ctx, talosconfig, 30*time.Second); err != nil {
		return fmt.Errorf("talos-sim did not write its talosconfig (see %s): %w", filepath.Join(workDir, "talos-sim.log"), err)
	}

	step("starting talos-ccm")

	ccm, err := startProcess(filepath.Join(opts.binDir, "talos-ccm"), filepath.Join(workDir, "talos-ccm.log"),
		"--kubeconfig", kubeconfig,
		"--talosconfig", talosconfig,
		"--state-dir", filepath.Join(workDir, "state"),
		"--metrics-bind-address", "127.0.0.1:0",
		"--metrics-secure=false",
		"--health-probe-bind-address", "127.0.0.1:0",
	)
	if err != nil {
		return err
	}

	defer ccm.stop()

	waitCtx := ctx
	if opts.exitWhenInitialized {
		var cancel context.CancelFunc

		waitCtx, cancel = context.WithTimeout(ctx, opts.timeout)
		defer cancel()
	}

	nodes, err := watchProgress(waitCtx, cp.Clientset(), opts.machines, []*process{sim, ccm})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("not every Node was initialized within %s (logs in %s)", opts.timeout, workDir)
		}

		if ctx.Err() != nil {
			return nil
		}

		return err
	}

	printTable(os.Stdout, nodes)

	fmt.Printf("\nkubeconfig: %s\n  try: kubectl --kubeconfig %s get nodes -o wide\nlogs: %s\n", kubeconfig, kubeconfig, workDir)

	if opts.exitWhenInitialized {
		return nil
	}

	fmt.Println("\nrunning; press Ctrl-C to stop everything")

	select {
	case <-ctx.Done():
	case <-sim.exited:
		return fmt.Errorf("talos-sim exited (see its log in %s)", workDir)
	case <-ccm.exited:
		return fmt.Errorf("talos-ccm exited (see its log in %s)", workDir)
	}

	step("stopping")

	return nil
}

func step(msg string) {
	fmt.Printf("==> %s\n", msg)
}

func waitForFile(ctx context.Context, path string, timeout time.Duration) error {
	deadline := time.After(timeout)

	for {
		if st, err := os.Stat(path); err == nil && st.Size() > 0 {
			return nil
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("%s not written within %s", path, timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// process is a child process whose output goes to a log file.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
	name   string
}

func startProcess(path, logPath string, args ...string) (*process, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("failed to create %s: %w", logPath, err)
	}

	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// The child dies with the demo even if the demo itself is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	if err = cmd.Start(); err != nil {
		logFile.Close() //nolint:errcheck

		return nil, fmt.Errorf("failed to start %s (run make build first): %w", path, err)
	}

	p := &process{cmd: cmd, exited: make(chan struct{}), name: filepath.Base(path)}

	go func() {
		cmd.Wait()      //nolint:errcheck
		logFile.Close() //nolint:errcheck
		close(p.exited)
	}()

	return p, nil
}

// stop sends SIGTERM and waits; SIGKILL after 10 seconds.
func (p *process) stop() {
	select {
	case <-p.exited:
		return
	default:
	}

	p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck

	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill() //nolint:errcheck
		<-p.exited
	}
}

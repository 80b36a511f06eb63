//go:build faults

package faults_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ccmBinDir is where the talos-ccm binary is built, once for the whole run (set by TestMain).
var ccmBinDir string

// ccmBinaries builds the talos-ccm binary on first use, once per variant: plain, or with the race detector
// (only when the suite itself runs with it), so that a data race talos-ccm hits under a fault is reported in
// its log. The race detector slows talos-ccm down several times: tests of a thousand Nodes use the plain one.
var ccmBinaries = map[bool]func() (string, error){
	false: sync.OnceValues(func() (string, error) { return buildCCM(false) }),
	true:  sync.OnceValues(func() (string, error) { return buildCCM(true) }),
}

func buildCCM(race bool) (string, error) {
	bin, flags := filepath.Join(ccmBinDir, "talos-ccm"), []string{}
	if race {
		bin, flags = bin+"-race", []string{"-race"}
	}

	args := append([]string{"build", "-o", bin}, flags...)

	out, err := exec.Command("go", append(args, "github.com/talos-ccm/talos-ccm/cmd/talos-ccm")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("failed to build talos-ccm: %w: %s", err, out)
	}

	return bin, nil
}

// ccmConfig is how one talos-ccm process is started.
type ccmConfig struct {
	kubeconfig  string
	talosconfig string
	// stateDir persists the decisions across processes; empty keeps them in memory.
	stateDir string
	// socket is the read-only state API's unix socket; empty disables the API.
	socket string
	// args are more flags.
	args []string
	// race runs talos-ccm with the race detector when the suite runs with it.
	race bool
}

// ccmProcess is one talos-ccm process. Its log (JSON lines) is checked when the test ends: an error-level
// line fails the test unless it falls in a window the test declared with expectErrorsBetween, and a panic
// or a data race report always does.
type ccmProcess struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}

	mu      sync.Mutex
	windows []errorWindow
}

// errorWindow is a span of time during which a fault makes error-level lines expected.
type errorWindow struct {
	from, to time.Time
	why      string
}

// startCCM starts talos-ccm and stops it (SIGTERM) when the test ends.
func startCCM(t *testing.T, name string, cfg ccmConfig) *ccmProcess {
	t.Helper()

	bin, err := ccmBinaries[cfg.race && raceEnabled]()
	if err != nil {
		t.Fatal(err)
	}

	args := []string{
		"--kubeconfig", cfg.kubeconfig,
		"--talosconfig", cfg.talosconfig,
		"--state-dir", cfg.stateDir,
		"--api-listen", cfg.socket,
		"--metrics-bind-address", "0",
		"--health-probe-bind-address", "0",
		"--leader-elect=false",
	}

	p := &ccmProcess{
		t:       t,
		name:    name,
		cmd:     exec.Command(bin, append(args, cfg.args...)...),
		logPath: logPath(t, name),
		exited:  make(chan struct{}),
	}

	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatalf("failed to create the log of %s: %v", name, err)
	}

	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	// Never outlive the test binary, even when it is killed.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

	if err = p.cmd.Start(); err != nil {
		logFile.Close() //nolint:errcheck
		t.Fatalf("failed to start %s: %v", name, err)
	}

	go func() {
		p.cmd.Wait()    //nolint:errcheck // The exit is reported through exited and ProcessState.
		logFile.Close() //nolint:errcheck
		close(p.exited)
	}()

	t.Cleanup(func() {
		p.stop()
		p.checkLog()
	})

	return p
}

// logPath is where a process's log goes: into $FAULTS_LOG_DIR when set (kept after the run, to read in full
// what the failure messages only show the end of), else into the test's temporary directory.
func logPath(t *testing.T, name string) string {
	dir := os.Getenv("FAULTS_LOG_DIR")
	if dir == "" {
		return filepath.Join(t.TempDir(), name+".log")
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("failed to create %s: %v", dir, err)
	}

	return filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_")+"-"+name+".log")
}

// kill ends the process with SIGKILL, as the kernel's OOM killer or a node failure would.
func (p *ccmProcess) kill() {
	p.t.Helper()

	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		p.t.Fatalf("failed to kill %s: %v", p.name, err)
	}

	<-p.exited
}

// stop ends the process with SIGTERM and waits for it; it must stop within 30 seconds.
func (p *ccmProcess) stop() {
	p.t.Helper()

	if !p.running() {
		return
	}

	p.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck // It may have exited in between.

	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.t.Errorf("%s did not stop within 30s of SIGTERM", p.name)
		p.kill()
	}
}

// running reports whether the process has not exited.
func (p *ccmProcess) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// errExited is what a check that talos-ccm keeps running says once it has exited.
var errExited = errors.New("talos-ccm exited")

// requireRunning fails the test if the process has exited: talos-ccm must ride out the fault.
func (p *ccmProcess) requireRunning() {
	p.t.Helper()

	if !p.running() {
		p.t.Fatalf("%s exited (%s); it must recover without a restart:\n%s", p.name, p.cmd.ProcessState, p.logTail(30))
	}
}

// expectErrorsBetween declares error-level lines logged between from and to as caused by the test.
func (p *ccmProcess) expectErrorsBetween(from, to time.Time, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()

	p.windows = append(p.windows, errorWindow{from: from, to: to, why: why})
}

// logLine is what the log check reads of one JSON line of zap's production encoder.
type logLine struct {
	Level  string `json:"level"`
	TS     string `json:"ts"`
	Logger string `json:"logger"`
	Msg    string `json:"msg"`
	Error  string `json:"error"`
}

// zapISO8601 is the layout of zapcore.ISO8601TimeEncoder.
const zapISO8601 = "2006-01-02T15:04:05.000Z0700"

// checkLog fails the test for every error-level line outside the declared windows, and for any panic or
// data race report.
func (p *ccmProcess) checkLog() {
	p.t.Helper()

	data, err := os.ReadFile(p.logPath)
	if err != nil {
		p.t.Errorf("failed to read the log of %s: %v", p.name, err)

		return
	}

	p.mu.Lock()
	windows := p.windows
	p.mu.Unlock()

	var unexpected, expected []string

	scanner := bufio.NewScanner(bytes.NewReader(data))
	scanner.Buffer(make([]byte, 0, 64<<10), 16<<20)

	for scanner.Scan() {
		text := scanner.Text()

		var line logLine
		if json.Unmarshal([]byte(text), &line) != nil {
			// Not zap's: the Go runtime writes panics, fatal errors and race reports as plain text.
			if strings.HasPrefix(text, "panic:") || strings.HasPrefix(text, "fatal error:") || strings.Contains(text, "WARNING: DATA RACE") {
				unexpected = append(unexpected, text)
			}

			continue
		}

		switch line.Level {
		case "error", "dpanic", "panic", "fatal":
		default:
			continue
		}

		summary := fmt.Sprintf("%s %s: %s", line.Logger, line.Msg, line.Error)

		if inWindow(line.TS, windows) {
			expected = append(expected, summary)
		} else {
			unexpected = append(unexpected, line.TS+" "+summary)
		}
	}

	if len(expected) > 0 {
		p.t.Logf("%s logged %d error(s) while the test's fault was on, as expected; the first: %s", p.name, len(expected), expected[0])
	}

	if len(unexpected) > 0 {
		p.t.Errorf("%s logged %d error(s) or crash report(s) the test did not cause on purpose, the first: %s",
			p.name, len(unexpected), unexpected[0])
	}

	if p.t.Failed() {
		p.t.Logf("%s log, last warnings and errors (set FAULTS_LOG_DIR to keep the whole log):\n%s", p.name, p.logTail(30))
	}
}

func inWindow(ts string, windows []errorWindow) bool {
	at, err := time.Parse(zapISO8601, ts)
	if err != nil {
		return false
	}

	for _, w := range windows {
		if !at.Before(w.from) && !at.After(w.to) {
			return true
		}
	}

	return false
}

// countLog counts the log lines whose message is msg.
func (p *ccmProcess) countLog(msg string) int {
	p.t.Helper()

	data, err := os.ReadFile(p.logPath)
	if err != nil {
		p.t.Fatalf("failed to read the log of %s: %v", p.name, err)
	}

	n := 0

	for text := range strings.Lines(string(data)) {
		var line logLine
		if json.Unmarshal([]byte(text), &line) == nil && line.Msg == msg {
			n++
		}
	}

	return n
}

// logTail returns the last lines of the log that are warnings, errors or not zap's (crash reports).
func (p *ccmProcess) logTail(lines int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}

	var kept []string

	for text := range strings.Lines(string(data)) {
		var line logLine
		if json.Unmarshal([]byte(text), &line) == nil && (line.Level == "debug" || line.Level == "info") {
			continue
		}

		kept = append(kept, strings.TrimRight(text, "\n"))
	}

	return strings.Join(kept[max(len(kept)-lines, 0):], "\n")
}

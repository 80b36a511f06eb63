package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/talos-ccm/talos-ccm/internal/profilepaths"
	"github.com/talos-ccm/talos-ccm/test/benchclusters/hostapi"
)

// hostProcess is the running host binary (test/benchclusters/host) and its HTTP API.
type hostProcess struct {
	cmd  *exec.Cmd
	addr string
	http *http.Client
	done chan error
}

// buildHost builds the host binary into dir.
func buildHost(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "host")

	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./test/benchclusters/host")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr

	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("failed to build the host: %w", err)
	}

	return bin, nil
}

// descriptorCost runs the host binary to measure what its goroutine descriptors cost between from and to of
// them (descriptors.Cost): a new process of the host's build, whose runtime's list of descriptors grows as
// the host's did.
func descriptorCost(ctx context.Context, bin string, from, to float64) (float64, error) {
	out, err := exec.CommandContext(ctx, bin, "--descriptor-cost", fmt.Sprintf("%.0f,%.0f", from, to)).Output()
	if err != nil {
		return 0, fmt.Errorf("failed to measure the goroutine descriptors' cost: %w", err)
	}

	cost, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
	if err != nil {
		return 0, fmt.Errorf("failed to read the goroutine descriptors' cost: %w", err)
	}

	return cost, nil
}

// startHost starts the host binary over the kubeconfigs, its log into logPath, and waits for its address.
func startHost(ctx context.Context, bin string, kubeconfigs []string, opts options, logPath string) (*hostProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("failed to create the host's log: %w", err)
	}

	cmd := exec.Command(bin, "--kubeconfigs", strings.Join(kubeconfigs, ","), "--log-level", opts.logLevel,
		"--mem-profile-rate", strconv.Itoa(opts.memProfileRate))
	cmd.Stderr = logFile

	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, errors.Join(fmt.Errorf("failed to read the host's output: %w", err), logFile.Close())
	}

	if err = cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("failed to start the host: %w", err), logFile.Close())
	}

	h := &hostProcess{
		cmd:  cmd,
		done: make(chan error, 1),
		// No connection kept alive: the host's sockets are the apiservers' connections and nothing else.
		http: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
	}

	lines := bufio.NewScanner(stdout)

	addr := make(chan string, 1)

	go func() {
		if lines.Scan() {
			addr <- lines.Text()
		}

		close(addr)

		_, _ = io.Copy(io.Discard, stdout)
		h.done <- errors.Join(cmd.Wait(), logFile.Close())
	}()

	select {
	case a, ok := <-addr:
		if !ok {
			return nil, fmt.Errorf("the host exited before it listened: %w (log: %s)", <-h.done, logPath)
		}

		h.addr = a
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), h.stop())
	case <-time.After(time.Minute):
		return nil, errors.Join(errors.New("the host did not start within a minute"), h.stop())
	}

	return h, nil
}

// stop stops the host and waits for it, and returns how it exited.
func (h *hostProcess) stop() error {
	_ = h.cmd.Process.Signal(syscall.SIGTERM)

	select {
	case err := <-h.done:
		return err
	case <-time.After(time.Minute):
		_ = h.cmd.Process.Kill()

		return <-h.done
	}
}

func (h *hostProcess) pid() int {
	return h.cmd.Process.Pid
}

// declare declares clusters to the host.
func (h *hostProcess) declare(ctx context.Context, clusters []hostapi.Cluster) error {
	return h.call(ctx, http.MethodPost, hostapi.ClustersPath, clusters, nil)
}

// remove removes clusters (none: every cluster), and returns once they are all gone.
func (h *hostProcess) remove(ctx context.Context, ids []string) error {
	if ids == nil {
		ids = []string{}
	}

	return h.call(ctx, http.MethodDelete, hostapi.ClustersPath, ids, nil)
}

// stats reads the host's counters; gc collects garbage first, for its live heap.
func (h *hostProcess) stats(ctx context.Context, query string) (hostapi.Stats, error) {
	path := hostapi.StatsPath
	if query != "" {
		path += "?" + query
	}

	var out hostapi.Stats

	return out, h.call(ctx, http.MethodGet, path, nil, &out)
}

func (h *hostProcess) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader

	if in != nil {
		encoded, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("failed to encode the request: %w", err)
		}

		body = bytes.NewReader(encoded)
	}

	req, err := http.NewRequestWithContext(ctx, method, "http://"+h.addr+path, body)
	if err != nil {
		return fmt.Errorf("failed to build the request: %w", err)
	}

	resp, err := h.http.Do(req)
	if err != nil {
		return fmt.Errorf("failed to call the host's %s %s: %w", method, path, err)
	}

	defer resp.Body.Close() //nolint:errcheck // Read to the end below.

	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)

		return fmt.Errorf("host's %s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(msg)))
	}

	if out == nil {
		return nil
	}

	if err = json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("failed to decode the host's %s: %w", path, err)
	}

	return nil
}

// saveProfile writes one of the host's /debug/pprof endpoints (path and query) to file.
func (h *hostProcess) saveProfile(ctx context.Context, path, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+h.addr+path, nil)
	if err != nil {
		return fmt.Errorf("failed to build the request: %w", err)
	}

	resp, err := h.http.Do(req)
	if err != nil {
		return fmt.Errorf("failed to read the host's %s: %w", path, err)
	}

	defer resp.Body.Close() //nolint:errcheck // Read to the end below.

	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("host's %s: %s", path, resp.Status)
	}

	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("failed to read the host's %s: %w", path, err)
	}

	// A profile names the host's binary by its path here (the host is built with -trimpath, so its
	// sources are named by their module's path): kept as its file name alone.
	if strings.HasSuffix(file, ".pprof") {
		if data, err = profilepaths.Rewrite(data, profilepaths.Base); err != nil {
			return fmt.Errorf("host's %s: %w", path, err)
		}
	}

	if err = os.WriteFile(file, data, 0o644); err != nil {
		return fmt.Errorf("failed to write %s: %w", file, err)
	}

	return nil
}

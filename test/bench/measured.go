package main

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// resultsDir is where `make bench` writes its results; changes there are the bench's own, not a change of
// the code measured.
const resultsDir = "bench/results"

// measured says what a run measured: the commit of the tree, the talos-ccm binary's version, and the
// defaults of the talos-ccm flags that set its speed, which the floor copies.
type measured struct {
	commit  string
	version string
	// concurrency, qps and burst are talos-ccm's defaults of --concurrency, --kube-api-qps and
	// --kube-api-burst, as its --help says; qps is 0 when talos-ccm has no client-side rate limit.
	concurrency int
	qps         float64
	burst       int
	// binary is the talos-ccm binary's size.
	binary binarySize
}

// inspect finds what a run measures. A failure to read the commit is no reason not to measure: it is
// reported as unknown.
func inspect(ctx context.Context, ccmBin string) (measured, error) {
	m := measured{commit: gitCommit(ctx)}

	version, err := exec.CommandContext(ctx, ccmBin, "--version").Output()
	if err != nil {
		return m, fmt.Errorf("failed to run %s --version (make build first): %w", ccmBin, err)
	}

	m.version = strings.TrimSpace(string(version))

	if m.binary, err = readBinarySize(ccmBin); err != nil {
		return m, err
	}

	// --help may exit with a non-zero status after printing the usage: the output is what counts.
	help, _ := exec.CommandContext(ctx, ccmBin, "--help").CombinedOutput()

	if m.concurrency, err = intDefault(string(help), "concurrency"); err != nil {
		return m, err
	}

	if m.burst, err = intDefault(string(help), "kube-api-burst"); err != nil {
		return m, err
	}

	qps, ok := flagDefault(string(help), "kube-api-qps")
	if !ok {
		return m, fmt.Errorf("failed to find the default of --kube-api-qps in %s --help", ccmBin)
	}

	if m.qps, err = strconv.ParseFloat(qps, 64); err != nil {
		return m, fmt.Errorf("failed to parse the default of --kube-api-qps %q: %w", qps, err)
	}

	m.qps = max(m.qps, 0)

	return m, nil
}

// gitCommit is the short commit of the checkout the bench runs in, with "-dirty" when the tree has changes
// outside the bench's results; "unknown" without git.
func gitCommit(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()

	head, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}

	commit := strings.TrimSpace(string(head))

	// --no-optional-locks: the bench only reads, and must not hold the index lock of the others working in
	// the same checkout.
	status, err := exec.CommandContext(ctx, "git", "--no-optional-locks", "status", "--porcelain", "--",
		".", ":(exclude)"+resultsDir).Output()

	switch {
	case err != nil:
		return commit + "-unknown-state"
	case len(strings.TrimSpace(string(status))) > 0:
		return commit + "-dirty"
	default:
		return commit
	}
}

func intDefault(help, name string) (int, error) {
	v, ok := flagDefault(help, name)
	if !ok {
		return 0, fmt.Errorf("failed to find the default of --%s in talos-ccm --help", name)
	}

	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("failed to parse the default of --%s %q: %w", name, v, err)
	}

	return n, nil
}

// flagDefault finds the default of a flag in pflag's usage text ("--name type   help (default 64)"); a
// flag without a default, or not in the text, is not found.
func flagDefault(help, name string) (string, bool) {
	scanner := bufio.NewScanner(strings.NewReader(help))

	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if !containsFlag(fields, "--"+name) {
			continue
		}

		line := scanner.Text()

		i := strings.LastIndex(line, "(default ")
		if i < 0 || !strings.HasSuffix(line, ")") {
			return "", false
		}

		return strings.Trim(line[i+len("(default "):len(line)-1], `"`), true
	}

	return "", false
}

// containsFlag says whether a usage line names the flag: "--name" or "-n, --name" before its help text.
func containsFlag(fields []string, flag string) bool {
	for i, f := range fields {
		if f == flag {
			return true
		}

		// Only the short flag ("-n,") may come before the long one.
		if i > 0 || !strings.HasSuffix(f, ",") {
			return false
		}
	}

	return false
}

// Command readme copies the bench's report into the README: it replaces the lines between the markers
// <!-- bench-table:begin --> and <!-- bench-table:end --> with the report inside a code fence, so that the
// table in the README is always one the bench wrote, never one edited by hand (hack/bench-readme.sh runs
// it).
//
//	go run ./test/bench/readme README.md bench/results/report.txt
package main

import (
	"fmt"
	"os"
	"strings"
)

// The markers around the bench's table in the README, each on a line of its own.
const (
	beginMarker = "<!-- bench-table:begin -->"
	endMarker   = "<!-- bench-table:end -->"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: readme README.md REPORT")
		os.Exit(2)
	}

	if err := run(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "bench-readme:", err)
		os.Exit(1)
	}
}

func run(readmePath, reportPath string) error {
	readme, err := os.ReadFile(readmePath)
	if err != nil {
		return fmt.Errorf("failed to read the README: %w", err)
	}

	report, err := os.ReadFile(reportPath)
	if err != nil {
		return fmt.Errorf("failed to read the bench report (run make bench first): %w", err)
	}

	if strings.TrimSpace(string(report)) == "" {
		return fmt.Errorf("failed to copy the bench report: %s is empty", reportPath)
	}

	updated, err := replaceBlock(string(readme), string(report))
	if err != nil {
		return fmt.Errorf("failed to update %s: %w", readmePath, err)
	}

	info, err := os.Stat(readmePath)
	if err != nil {
		return fmt.Errorf("failed to read the README: %w", err)
	}

	if err = os.WriteFile(readmePath, []byte(updated), info.Mode().Perm()); err != nil {
		return fmt.Errorf("failed to write the README: %w", err)
	}

	return nil
}

// replaceBlock replaces what lies between the marker lines of doc with report in a code fence. The
// markers must each be there exactly once, begin before end.
func replaceBlock(doc, report string) (string, error) {
	lines := strings.SplitAfter(doc, "\n")
	begin, end := -1, -1

	for i, line := range lines {
		switch strings.TrimSpace(line) {
		case beginMarker:
			if begin >= 0 {
				return "", fmt.Errorf("marker %s is there twice (lines %d and %d)", beginMarker, begin+1, i+1)
			}

			begin = i
		case endMarker:
			if end >= 0 {
				return "", fmt.Errorf("marker %s is there twice (lines %d and %d)", endMarker, end+1, i+1)
			}

			end = i
		}
	}

	switch {
	case begin < 0 && end < 0:
		return "", fmt.Errorf("no markers: put the lines %s and %s where the bench table goes", beginMarker, endMarker)
	case begin < 0:
		return "", fmt.Errorf("no marker %s before %s (line %d)", beginMarker, endMarker, end+1)
	case end < 0:
		return "", fmt.Errorf("no marker %s after %s (line %d)", endMarker, beginMarker, begin+1)
	case end < begin:
		return "", fmt.Errorf("marker %s (line %d) comes before %s (line %d)", endMarker, end+1, beginMarker, begin+1)
	}

	// The begin marker's line ends with its line break: the end marker's line follows it.
	return strings.Join(lines[:begin+1], "") + fence(report) + strings.Join(lines[end:], ""), nil
}

// fence puts text in a code fence longer than any run of backticks in it.
func fence(text string) string {
	ticks := "```"
	for strings.Contains(text, ticks) {
		ticks += "`"
	}

	text = strings.TrimLeft(text, "\n")
	if !strings.HasSuffix(text, "\n") {
		text += "\n"
	}

	return ticks + "\n" + text + ticks + "\n"
}

// Command ccmctl inspects a running talos-ccm through its read-only API (every fact and decision is a
// resource: `ccmctl get`, `ccmctl explain node`), and checks config files offline or against live facts.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
	"github.com/talos-ccm/talos-ccm/internal/version"
	// The resource packages register their protobuf types, so that resources decode to typed values.
	_ "github.com/talos-ccm/talos-ccm/internal/resources"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

const usage = `ccmctl inspects a running talos-ccm through its read-only API.

Usage:
  ccmctl get TYPE [ID...] [-l SELECTOR] [-o table|yaml|json|jsonpath=TEMPLATE] [--watch] [-n NAMESPACE]
  ccmctl explain node NAME
  ccmctl config validate FILE
  ccmctl config test FILE --node NAME
  ccmctl completion bash|zsh|fish
  ccmctl version

TYPE is a resource type or any of its aliases (ccmctl get rd lists them). SELECTOR and TEMPLATE are
written as for kubectl:
  -l 'key=value,key!=value,key,!key,key in (a,b),key notin (a,b)'
  -o 'jsonpath={range .items[*]}{.metadata.id}{"\n"}{end}'

Connection flags (before or after the command):
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)

	stop()
	os.Exit(code)
}

// usageError is a wrong command line: usage is printed with it.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// run runs the command line args until it is done or ctx is (which a watch waits for).
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	conn := &connection{}

	err := dispatch(ctx, conn, args, stdout)

	var uerr usageError

	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprint(stdout, usage+conn.flags().FlagUsages())

		return exitOK
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "ccmctl: %s\n\n%s%s", uerr.msg, usage, conn.flags().FlagUsages())

		return exitUsage
	}

	for line := range strings.SplitSeq(conn.describe(err), "\n") {
		fmt.Fprintln(stderr, "ccmctl:", line)
	}

	return exitError
}

func dispatch(ctx context.Context, conn *connection, args []string, stdout io.Writer) error {
	// Connection flags may come before the command.
	global := conn.flags()
	global.SetInterspersed(false)

	if err := global.Parse(args); err != nil {
		return asUsage(err)
	}

	rest := global.Args()
	if len(rest) == 0 {
		return usageError{msg: "no command"}
	}

	switch rest[0] {
	case "get":
		return runGet(ctx, conn, rest[1:], stdout)
	case "explain":
		return runExplain(ctx, conn, rest[1:], stdout)
	case "config":
		if len(rest) < 2 {
			return usageError{msg: "config needs a subcommand: validate or test"}
		}

		switch rest[1] {
		case "validate":
			return runConfigValidate(conn, rest[2:], stdout)
		case "test":
			return runConfigTest(ctx, conn, rest[2:], stdout)
		default:
			return usageError{msg: fmt.Sprintf("unknown config subcommand %q (want validate or test)", rest[1])}
		}
	case "completion":
		if len(rest) != 2 {
			return usageError{msg: "usage: ccmctl completion bash|zsh|fish"}
		}

		return writeCompletionScript(stdout, rest[1])
	case completeCommand:
		return writeCompletions(ctx, conn, rest[1:], stdout)
	case "version":
		if len(rest) > 1 {
			return usageError{msg: "usage: ccmctl version"}
		}

		fmt.Fprintln(stdout, "ccmctl", version.Get())

		return nil
	case "help":
		return pflag.ErrHelp
	default:
		return usageError{msg: fmt.Sprintf("unknown command %q", rest[0])}
	}
}

// asUsage turns a flag parsing error into a usage error.
func asUsage(err error) error {
	if errors.Is(err, pflag.ErrHelp) {
		return err
	}

	return usageError{msg: err.Error()}
}

// commandFlags is a command's flag set, with the connection flags.
func commandFlags(conn *connection, name string) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.AddFlagSet(conn.flags())

	return fs
}

// getFlags is the flag set of get, which sets opts and selector.
func getFlags(conn *connection, opts *ccmctl.GetOptions, selector *string) *pflag.FlagSet {
	fs := commandFlags(conn, "get")
	fs.StringVarP(&opts.Output, "output", "o", ccmctl.OutputTable, "output format: table, yaml, json or jsonpath=TEMPLATE")
	fs.BoolVarP(&opts.Watch, "watch", "w", false, "stream changes after the current resources")
	fs.StringVarP(&opts.Namespace, "namespace", "n", "", "namespace (default: the type's)")
	fs.StringVarP(selector, "selector", "l", "", "label selector: key=value, key!=value, key, !key, key in (a,b), key notin (a,b), comma-separated")

	return fs
}

func runGet(ctx context.Context, conn *connection, args []string, stdout io.Writer) error {
	var (
		opts     ccmctl.GetOptions
		selector string
	)

	fs := getFlags(conn, &opts, &selector)

	if err := fs.Parse(args); err != nil {
		return asUsage(err)
	}

	if fs.NArg() == 0 {
		return usageError{msg: "get needs a TYPE (ccmctl get rd lists the types)"}
	}

	opts.Type, opts.IDs = fs.Arg(0), fs.Args()[1:]

	if selector != "" && len(opts.IDs) > 0 {
		return usageError{msg: "get takes IDs or a label selector (-l), not both"}
	}

	var err error

	if opts.Labels, err = ccmctl.ParseSelector(selector); err != nil {
		return usageError{msg: err.Error()}
	}

	st, closeConn, err := conn.open()
	if err != nil {
		return err
	}

	defer closeConn()

	if !opts.Watch {
		var cancel context.CancelFunc

		ctx, cancel = context.WithTimeout(ctx, conn.timeout)
		defer cancel()
	}

	return ccmctl.Get(ctx, st, opts, stdout)
}

func runExplain(ctx context.Context, conn *connection, args []string, stdout io.Writer) error {
	fs := commandFlags(conn, "explain")

	if err := fs.Parse(args); err != nil {
		return asUsage(err)
	}

	if fs.NArg() != 2 || fs.Arg(0) != "node" {
		return usageError{msg: "usage: ccmctl explain node NAME"}
	}

	st, closeConn, err := conn.open()
	if err != nil {
		return err
	}

	defer closeConn()

	ctx, cancel := context.WithTimeout(ctx, conn.timeout)
	defer cancel()

	return ccmctl.Explain(ctx, st, fs.Arg(1), stdout)
}

func runConfigValidate(conn *connection, args []string, stdout io.Writer) error {
	fs := commandFlags(conn, "config validate")

	if err := fs.Parse(args); err != nil {
		return asUsage(err)
	}

	if fs.NArg() != 1 {
		return usageError{msg: "usage: ccmctl config validate FILE"}
	}

	line, err := ccmctl.ValidateConfigFile(fs.Arg(0))
	if err != nil {
		return err
	}

	fmt.Fprintln(stdout, line)

	return nil
}

// configTestFlags is the flag set of config test, which sets nodeName.
func configTestFlags(conn *connection, nodeName *string) *pflag.FlagSet {
	fs := commandFlags(conn, "config test")
	fs.StringVar(nodeName, "node", "", "the Node whose live facts the rules are tested on")

	return fs
}

func runConfigTest(ctx context.Context, conn *connection, args []string, stdout io.Writer) error {
	var nodeName string

	fs := configTestFlags(conn, &nodeName)

	if err := fs.Parse(args); err != nil {
		return asUsage(err)
	}

	if fs.NArg() != 1 || nodeName == "" {
		return usageError{msg: "usage: ccmctl config test FILE --node NAME"}
	}

	cfg, err := ccmctl.LoadConfigFile(fs.Arg(0))
	if err != nil {
		return err
	}

	st, closeConn, err := conn.open()
	if err != nil {
		return err
	}

	defer closeConn()

	ctx, cancel := context.WithTimeout(ctx, conn.timeout)
	defer cancel()

	run, err := ccmctl.TestConfig(ctx, st, cfg, nodeName, time.Now())
	if err != nil {
		return err
	}

	return ccmctl.WriteDryRun(stdout, nodeName, run)
}

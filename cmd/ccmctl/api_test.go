package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/api"
	"github.com/talos-ccm/talos-ccm/internal/resources"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// asCcmctlEnv makes the test binary run as ccmctl, for the completion scripts to call.
const asCcmctlEnv = "CCMCTL_TEST_AS_CCMCTL"

func TestMain(m *testing.M) {
	if os.Getenv(asCcmctlEnv) == "1" {
		main()
	}

	os.Exit(m.Run())
}

// serve starts talos-ccm's API server, on a unix socket, over a state with talos-ccm's definitions and
// three NodeTransforms: a and c labelled team=db, b team=web. It returns the state and the endpoint flag.
func serve(t *testing.T) (state.State, string) {
	t.Helper()

	st := state.WrapCore(namespaced.NewState(inmem.Build))
	require.NoError(t, resources.Register(t.Context(), st))

	for id, team := range map[string]string{"a": "db", "b": "web", "c": "db"} {
		nt := node.NewNodeTransform(node.NamespaceName, id)
		nt.TypedSpec().Value = &specs.NodeTransformSpec{Platform: "metal", ProviderId: "talos://metal/" + id}
		nt.Metadata().Labels().Set("team", team)
		require.NoError(t, st.Create(t.Context(), nt))
	}

	dir, err := os.MkdirTemp("", "ccmctl")
	require.NoError(t, err)

	t.Cleanup(func() { os.RemoveAll(dir) }) //nolint:errcheck

	socket := filepath.Join(dir, "ccm.sock")

	srv, err := api.Start(t.Context(), st, api.Options{Listen: socket}, zaptest.NewLogger(t))
	require.NoError(t, err)

	t.Cleanup(srv.Stop)

	return st, "--endpoint=" + socket
}

// runArgs runs the command line and returns its exit code, stdout and stderr.
func runArgs(t *testing.T, args ...string) (int, string, string) {
	t.Helper()

	var stdout, stderr bytes.Buffer

	code := run(t.Context(), args, &stdout, &stderr)
	t.Logf("ccmctl %s: exit %d\n%s%s", strings.Join(args, " "), code, stdout.String(), stderr.String())

	return code, stdout.String(), stderr.String()
}

// relabel sets the team label of NodeTransform id, and its platform.
func relabel(t *testing.T, st state.State, id, team, platform string) {
	t.Helper()

	r, err := st.Get(t.Context(), node.NewNodeTransform(node.NamespaceName, id).Metadata())
	require.NoError(t, err)

	nt, ok := r.(*node.NodeTransform)
	require.True(t, ok, "%T", r)

	nt.Metadata().Labels().Set("team", team)
	nt.TypedSpec().Value.Platform = platform
	require.NoError(t, st.Update(t.Context(), nt))
}

func TestGetThroughTheAPI(t *testing.T) {
	t.Parallel()

	_, endpoint := serve(t)

	for _, tc := range []struct {
		name string
		args []string
		code int
		// want is the whole stdout, unless wantRegexp matches a part of it.
		want       string
		wantRegexp string
		wantErr    string
	}{
		{
			name: "each alias once",
			args: []string{"get", "rd"},
			// Were it not for the dedupe, "as applystatus applystatus as".
			wantRegexp: `(?m)^meta +ResourceDefinition +applystatuses\.sink\.tccm\.dev +\d+ +as applystatus$`,
		},
		{
			name: "a label selector",
			args: []string{"get", "nt", "-l", "team=db"},
			want: `NAMESPACE   TYPE            ID   VERSION   PROVIDER ID       PLATFORM   INITIALIZE   PENDING
node        NodeTransform   a    1         talos://metal/a   metal      false        -
node        NodeTransform   c    1         talos://metal/c   metal      false        -
`,
		},
		{name: "a negated selector", args: []string{"get", "nt", "--selector", "team!=db", "-o", "jsonpath={.items[*].metadata.id}"}, want: "b"},
		{name: "a set", args: []string{"get", "nt", "-l", "team in (web, db)", "-o", "jsonpath={.items[*].metadata.id}"}, want: "a b c"},
		{name: "not set", args: []string{"get", "nt", "-l", "!team", "-o", "jsonpath={.items[*].metadata.id}"}, want: ""},
		{
			name: "jsonpath over the list",
			args: []string{"get", "nt", "-o", `jsonpath={range .items[*]}{.metadata.id}:{.spec.providerID}:{.metadata.labels.team}{"\n"}{end}`},
			want: "a:talos://metal/a:db\nb:talos://metal/b:web\nc:talos://metal/c:db\n",
		},
		{name: "jsonpath over one resource", args: []string{"get", "nt", "b", "-o", "jsonpath={.metadata.id} {.metadata.version}"}, want: "b 1"},
		{name: "jsonpath over several IDs", args: []string{"get", "nt", "c", "a", "-o", "jsonpath={.items[*].metadata.id}"}, want: "c a"},
		{name: "a bad template", args: []string{"get", "nt", "-o", "jsonpath={.items["}, code: exitError, wantErr: "failed to parse jsonpath template"},
		{name: "a bad selector", args: []string{"get", "nt", "-l", "team in (db"}, code: exitUsage, wantErr: "unbalanced parentheses"},
		{name: "IDs and a selector", args: []string{"get", "nt", "a", "-l", "team=db"}, code: exitUsage, wantErr: "IDs or a label selector"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			code, stdout, stderr := runArgs(t, append([]string{endpoint}, tc.args...)...)
			require.Equal(t, tc.code, code, stderr)

			if tc.wantErr != "" {
				assert.Contains(t, stderr, tc.wantErr)

				return
			}

			if tc.wantRegexp != "" {
				assert.Regexp(t, tc.wantRegexp, stdout)
			} else {
				assert.Equal(t, tc.want, stdout)
			}
		})
	}
}

// TestWatchThroughTheAPI watches with a label selector and a JSONPath template: resources come and go
// as their labels enter and leave the selection.
func TestWatchThroughTheAPI(t *testing.T) {
	t.Parallel()

	st, endpoint := serve(t)

	ctx, cancel := context.WithCancel(t.Context())
	r, w := io.Pipe()
	done := make(chan int)

	go func() {
		code := run(ctx, []string{endpoint, "get", "nt", "-w", "-l", "team=db", "-o", `jsonpath={.event} {.metadata.id} {.spec.platform}{"\n"}`}, w, io.Discard)
		w.Close() //nolint:errcheck
		done <- code
	}()

	lines := bufio.NewScanner(r)
	next := func() string {
		t.Helper()
		require.True(t, lines.Scan(), "ccmctl stopped")

		return lines.Text()
	}

	assert.Equal(t, "created a metal", next())
	assert.Equal(t, "created c metal", next())

	relabel(t, st, "b", "db", "metal")
	assert.Equal(t, "created b metal", next())

	relabel(t, st, "a", "web", "metal")
	assert.Equal(t, "destroyed a metal", next())

	relabel(t, st, "a", "web", "aws") // outside the selection: not shown
	relabel(t, st, "c", "db", "gcp")
	assert.Equal(t, "updated c gcp", next())

	cancel()
	io.Copy(io.Discard, r) //nolint:errcheck
	assert.Equal(t, exitOK, <-done)
}

func TestCompleteThroughTheAPI(t *testing.T) {
	t.Parallel()

	_, endpoint := serve(t)

	code, stdout, _ := runArgs(t, completeCommand, endpoint, "get", "nodetransforms", "")
	require.Equal(t, exitOK, code)
	assert.Equal(t, "a\nb\nc\n", stdout)

	// Without talos-ccm, the types are those ccmctl was built with, and there are no IDs.
	missing := "--endpoint=" + filepath.Join(t.TempDir(), "missing.sock")

	code, stdout, _ = runArgs(t, completeCommand, missing, "get", "nodet")
	require.Equal(t, exitOK, code)
	assert.Equal(t, "nodetransforms\n", stdout)

	code, stdout, _ = runArgs(t, completeCommand, missing, "get", "nt", "")
	require.Equal(t, exitOK, code)
	assert.Empty(t, stdout)
}

// TestBashCompletion runs the bash script as bash runs it on a TAB, with this test binary as ccmctl.
func TestBashCompletion(t *testing.T) {
	t.Parallel()

	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}

	_, endpoint := serve(t)

	bin, err := os.Executable()
	require.NoError(t, err)

	var script bytes.Buffer

	require.Equal(t, exitOK, run(t.Context(), []string{"completion", "bash"}, &script, io.Discard))

	for _, tc := range []struct {
		name  string
		words []string // COMP_WORDS, as bash splits them (at "=" too); the last is under the cursor
		want  []string
	}{
		{name: "types", words: []string{bin, endpoint, "get", "nodet"}, want: []string{"nodetransforms"}},
		{name: "IDs", words: []string{bin, endpoint, "get", "nt", ""}, want: []string{"a", "b", "c"}},
		{name: "output formats", words: []string{bin, endpoint, "get", "nt", "-o", "js"}, want: []string{"json", "jsonpath="}},
		{name: "after =", words: []string{bin, endpoint, "get", "nt", "--output", "=", "y"}, want: []string{"yaml"}},
		{name: "right after =", words: []string{bin, endpoint, "get", "nt", "--output", "="}, want: []string{"=table", "=yaml", "=json", "=jsonpath="}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			// The endpoint flag holds "=": bash splits it too, but it is not under the cursor.
			line := strings.Join(tc.words, " ")
			line = strings.ReplaceAll(line, " = ", "=")
			line = strings.ReplaceAll(line, " =", "=")

			cmd := exec.CommandContext(t.Context(), bash, "--norc", "--noprofile", "-c", script.String()+`
COMP_LINE="$1"; COMP_POINT=${#COMP_LINE}; shift
COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
_ccmctl
printf '%s\n' "${COMPREPLY[@]}"
`, "bash", line)
			cmd.Args = append(cmd.Args, tc.words...)
			cmd.Env = append(os.Environ(), asCcmctlEnv+"=1")

			out, err := cmd.Output()
			require.NoError(t, err)
			assert.Equal(t, tc.want, strings.Fields(string(out)), "COMP_LINE %q", line)
		})
	}
}

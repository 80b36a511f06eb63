package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/api"
	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// buildCcmctl builds the real ccmctl binary for the test.
func buildCcmctl(t *testing.T) string {
	t.Helper()

	bin := filepath.Join(t.TempDir(), "ccmctl")

	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/talos-ccm/talos-ccm/cmd/ccmctl").CombinedOutput()
	require.NoError(t, err, "go build ccmctl: %s", out)

	return bin
}

// socketDir is a temporary directory whose path is short enough for a unix socket.
func socketDir(t *testing.T) string {
	t.Helper()

	dir, err := os.MkdirTemp("", "ccmctl")
	require.NoError(t, err)

	t.Cleanup(func() { os.RemoveAll(dir) }) //nolint:errcheck

	return dir
}

// result is one run of ccmctl.
type result struct {
	stdout, stderr string
	code           int
}

func runCcmctl(t *testing.T, bin string, args ...string) result {
	t.Helper()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	var stdout, stderr bytes.Buffer

	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "CCMCTL_ENDPOINT=")

	err := cmd.Run()

	var exitErr *exec.ExitError

	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("ccmctl %s: %v", strings.Join(args, " "), err)
	}

	r := result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
	t.Logf("ccmctl %s: exit %d\n%s%s", strings.Join(args, " "), r.code, r.stdout, r.stderr)

	return r
}

// oneLineError asserts a failed run with exactly one line on stderr, which contains want.
func oneLineError(t *testing.T, r result, want string) {
	t.Helper()

	assert.Equal(t, 1, r.code)
	assert.Empty(t, r.stdout)
	assert.Equal(t, 1, strings.Count(r.stderr, "\n"), "one line: %q", r.stderr)
	assert.Contains(t, r.stderr, want)
}

func TestCcmctl(t *testing.T) {
	machines := fleet("ctl", 4, 21)
	sim, srv := talossim.StartTest(t, machines)

	socket := filepath.Join(socketDir(t), "ccm.sock")

	// A machine with Talos platform metadata, whose region label comes from Talos.
	idx := slices.IndexFunc(machines, func(m talossim.Machine) bool { return !m.NoPlatformMetadata && m.Region != "" })
	require.GreaterOrEqual(t, idx, 0, "the fleet needs a machine with a region")

	target := machines[idx]
	want := expect(target, talossim.DefaultClusterName)

	// The config in force labels the target's platform with a rule.
	configFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(configFile, []byte(`transformations:
  - name: db-team
    nodeSelector:
      - matchExpressions:
          - key: platform
            operator: In
            values: [`+target.Platform+`]
    labels:
      team: db
`), 0o600))

	startCCM(t, srv, app.Options{APIListen: socket, ConfigFile: configFile})
	joinNodes(t, machines)
	waitNodes(t, names(machines), 60*time.Second, initialized)
	waitNodes(t, []string{target.Name}, 30*time.Second, func(n *corev1.Node) bool { return n.Labels["team"] == "db" })

	bin := buildCcmctl(t)
	endpoint := "--endpoint=" + socket

	t.Run("get table", func(t *testing.T) {
		r := runCcmctl(t, bin, endpoint, "get", "nodetransforms")
		require.Equal(t, 0, r.code, r.stderr)

		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		assert.Regexp(t, `^NAMESPACE +TYPE +ID +VERSION +PROVIDER ID +PLATFORM +INITIALIZE +PENDING$`, lines[0])

		for _, m := range machines {
			assert.Regexp(t, regexp.MustCompile(`(?m)^node +NodeTransform +`+regexp.QuoteMeta(m.Name)+` +\d+ +`+regexp.QuoteMeta(expect(m, talossim.DefaultClusterName).providerID)+` +\S+ +true +- *$`), r.stdout)
		}

		// Aliases and options after the type work too.
		r = runCcmctl(t, bin, "get", "nt", target.Name, endpoint)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Len(t, strings.Split(strings.TrimSpace(r.stdout), "\n"), 2)
	})

	t.Run("get yaml", func(t *testing.T) {
		r := runCcmctl(t, bin, endpoint, "get", "nodetransform", target.Name, "-o", "yaml")
		require.Equal(t, 0, r.code, r.stderr)

		assert.Contains(t, r.stdout, "metadata:\n  namespace: node\n  type: NodeTransforms.node.tccm.dev\n  id: "+target.Name+"\n")
		assert.Contains(t, r.stdout, "\n  providerID: "+want.providerID+"\n")
		assert.Contains(t, r.stdout, "\n    topology.kubernetes.io/region: "+target.Region+"\n")
		assert.Contains(t, r.stdout, "\n  initialize: true\n")
	})

	t.Run("get json", func(t *testing.T) {
		r := runCcmctl(t, bin, endpoint, "get", "machinestatuses", "-o", "json")
		require.Equal(t, 0, r.code, r.stderr)

		seen := map[string]bool{}
		dec := json.NewDecoder(strings.NewReader(r.stdout))

		for {
			var doc struct {
				Metadata struct {
					ID string `json:"id"`
				} `json:"metadata"`
				Spec struct {
					Reachable bool `json:"reachable"`
				} `json:"spec"`
			}

			err := dec.Decode(&doc)
			if errors.Is(err, io.EOF) {
				break
			}

			require.NoError(t, err)

			seen[doc.Metadata.ID] = doc.Spec.Reachable
		}

		for _, m := range machines {
			assert.True(t, seen[m.Name], "%s is reachable", m.Name)
		}
	})

	t.Run("get rd", func(t *testing.T) {
		r := runCcmctl(t, bin, endpoint, "get", "rd")
		require.Equal(t, 0, r.code, r.stderr)

		for _, typ := range []string{"nodetransforms.node.tccm.dev", "kubenodes.kube.tccm.dev", "applystatuses.sink.tccm.dev", "machinestatuses.talos.tccm.dev"} {
			assert.Contains(t, r.stdout, typ)
		}

		// Each alias once ("as" and "applystatus" are declared, and added again by COSI).
		assert.Regexp(t, `(?m)^meta +ResourceDefinition +applystatuses\.sink\.tccm\.dev +\d+ +as applystatus$`, r.stdout)
	})

	t.Run("get jsonpath and label selector", func(t *testing.T) {
		ids := func(r result) []string {
			t.Helper()
			require.Equal(t, 0, r.code, r.stderr)

			return strings.Fields(r.stdout)
		}

		all := names(machines)
		slices.Sort(all)

		assert.Equal(t, all, ids(runCcmctl(t, bin, endpoint, "get", "nt", "-o", "jsonpath={.items[*].metadata.id}")))
		assert.Equal(t, all, ids(runCcmctl(t, bin, endpoint, "get", "nt", "-l", "!no-such-label", "-o", "jsonpath={.items[*].metadata.id}")))
		assert.Empty(t, ids(runCcmctl(t, bin, endpoint, "get", "nt", "-l", "no-such-label", "-o", "jsonpath={.items[*].metadata.id}")))
		assert.Equal(t, []string{want.providerID}, ids(runCcmctl(t, bin, endpoint, "get", "nt", target.Name, "-o", "jsonpath={.spec.providerID}")))
	})

	t.Run("explain", func(t *testing.T) {
		r := runCcmctl(t, bin, endpoint, "explain", "node", target.Name)
		require.Equal(t, 0, r.code, r.stderr)

		assert.Contains(t, r.stdout, "Initialized:    yes\n")
		assert.Contains(t, r.stdout, "Pending:        nothing\n")
		// The stage is read only for NotReady Nodes: a Ready Node's machine shows none.
		assert.Regexp(t, `(?m)^Machine: +reachable, Talos API at \S+, names itself node `+regexp.QuoteMeta(target.Name)+`, last seen `, r.stdout)
		assert.Regexp(t, `(?m)^Last apply: +\S+Z, decision version \d+`, r.stdout)
		assert.Regexp(t, `(?m)^providerID +- +`+regexp.QuoteMeta(want.providerID)+` +Talos platformMetadata.providerID +yes$`, r.stdout)
		assert.Regexp(t, `(?m)^label +topology.kubernetes.io/region +`+regexp.QuoteMeta(target.Region)+` +Talos platformMetadata.region +yes$`, r.stdout)
		assert.Regexp(t, `(?m)^address +InternalIP +\S+ +kubelet provided-node-ip annotation +yes$`, r.stdout)
		assert.Regexp(t, `(?m)^Matched rules: +db-team$`, r.stdout)
		assert.Regexp(t, `(?m)^label +team +db +rule db-team +yes$`, r.stdout)
	})

	t.Run("config validate", func(t *testing.T) {
		dir := t.TempDir()

		good := filepath.Join(dir, "good.yaml")
		require.NoError(t, os.WriteFile(good, []byte(rulesFile(target.Platform)), 0o600))

		r := runCcmctl(t, bin, "config", "validate", good)
		require.Equal(t, 0, r.code, r.stderr)
		assert.Equal(t, good+": valid: 2 transformation rules\n", r.stdout)

		bad := filepath.Join(dir, "bad.yaml")
		require.NoError(t, os.WriteFile(bad, []byte("global:\n  PreferIpv6: true\ntransformations:\n  - name: x\n    nodeSelector:\n      - matchExpressions:\n          - {key: platform, operator: Inn, values: [aws]}\n"), 0o600))

		r = runCcmctl(t, bin, "config", "validate", bad)
		assert.Equal(t, 1, r.code)
		assert.Equal(t, "ccmctl: "+bad+`:2: global: unknown key "PreferIpv6" (did you mean "preferIPv6"? keys are case-sensitive)`+"\n"+
			"ccmctl: "+bad+`:7: rule "x": nodeSelector[0].matchExpressions[0]: unknown operator "Inn" (known: In, NotIn, Exists, DoesNotExist, Gt, Lt, Regexp)`+"\n", r.stderr)
	})

	t.Run("config test", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "rules.yaml")
		require.NoError(t, os.WriteFile(file, []byte(rulesFile(target.Platform)), 0o600))

		r := runCcmctl(t, bin, endpoint, "config", "test", file, "--node", target.Name)
		require.Equal(t, 0, r.code, r.stderr)

		assert.Regexp(t, `(?m)^db-team +yes$`, r.stdout)
		assert.Regexp(t, `(?m)^elsewhere +no$`, r.stdout)
		assert.Contains(t, r.stdout, "Changes on node "+target.Name+", compared with the decision in force:\n")
		assert.Regexp(t, `(?m)^change +label +team +db +analytics +rule db-team$`, r.stdout)
		assert.Regexp(t, `(?m)^add +annotation +example.com/zone +- +`+regexp.QuoteMeta(target.Zone)+` +rule db-team$`, r.stdout)
		assert.Regexp(t, `(?m)^add +taint +dedicated +- +db:NoSchedule +rule db-team$`, r.stdout)
		assert.NotRegexp(t, `(?m)^(add|change|remove) +address`, r.stdout, "the addresses do not depend on the rules")

		oneLineError(t, runCcmctl(t, bin, endpoint, "config", "test", file, "--node", "no-such-node"), `node "no-such-node" not found`)
	})

	t.Run("errors", func(t *testing.T) {
		oneLineError(t, runCcmctl(t, bin, endpoint, "get", "bogus"), `unknown resource type "bogus"`)
		oneLineError(t, runCcmctl(t, bin, endpoint, "get", "nt", "no-such-node"), `NodeTransform "no-such-node" not found in namespace "node"`)
		oneLineError(t, runCcmctl(t, bin, endpoint, "explain", "node", "no-such-node"), `node "no-such-node" not found`)
		oneLineError(t, runCcmctl(t, bin, "--endpoint", filepath.Join(filepath.Dir(socket), "missing.sock"), "get", "nt"), "cannot reach talos-ccm at unix://")

		// A socket nobody serves.
		stale := filepath.Join(filepath.Dir(socket), "stale.sock")
		l, err := net.Listen("unix", stale)
		require.NoError(t, err)

		l.(*net.UnixListener).SetUnlinkOnClose(false)
		require.NoError(t, l.Close())

		oneLineError(t, runCcmctl(t, bin, "--endpoint", stale, "get", "nt"), "cannot reach talos-ccm at unix://"+stale+": ")

		r := runCcmctl(t, bin, endpoint, "get")
		assert.Equal(t, 2, r.code, "usage error")
	})

	t.Run("watch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()

		cmd := exec.CommandContext(ctx, bin, endpoint, "get", "nodetransforms", "--watch")

		stdout, err := cmd.StdoutPipe()
		require.NoError(t, err)

		require.NoError(t, cmd.Start())

		t.Cleanup(func() { cmd.Wait() }) //nolint:errcheck

		lines := make(chan string)

		go func() {
			defer close(lines)

			scanner := bufio.NewScanner(stdout)
			for scanner.Scan() {
				select {
				case lines <- scanner.Text():
				case <-ctx.Done():
					return
				}
			}
		}()

		next := func(match func(string) bool, what string) string {
			t.Helper()

			timeout := time.After(30 * time.Second)

			for {
				select {
				case line, ok := <-lines:
					require.True(t, ok, "ccmctl stopped before %s", what)
					t.Log(line)

					if match(line) {
						return line
					}
				case <-timeout:
					t.Fatalf("no %s within 30s", what)
				}
			}
		}

		header := next(func(string) bool { return true }, "header")
		assert.Regexp(t, `^EVENT +NAMESPACE +TYPE +ID +VERSION`, header)

		// The current resources come first, as created.
		for range machines {
			next(func(l string) bool { return strings.HasPrefix(l, "created ") }, "current resource")
		}

		// A new address on the machine changes its NodeTransform.
		addrs := slices.Clone(target.Addresses)
		addrs = append(addrs, talossim.Address{LinkName: "external", Prefix: netip.MustParsePrefix("192.0.2.251/32"), Scope: "global"})
		require.NoError(t, sim.SetAddresses(target.Name, addrs))

		line := next(func(l string) bool { return strings.Contains(l, " "+target.Name+" ") }, "event for "+target.Name)
		assert.Regexp(t, `^updated +node +NodeTransform +`+regexp.QuoteMeta(target.Name)+` +\d+`, line)
	})

	t.Run("writes refused", func(t *testing.T) {
		ep, err := api.ParseEndpoint(socket)
		require.NoError(t, err)

		conn, err := api.Dial(ep, api.ClientOptions{})
		require.NoError(t, err)

		defer conn.Close() //nolint:errcheck

		_, err = v1alpha1.NewStateClient(conn).Destroy(t.Context(), &v1alpha1.DestroyRequest{
			Namespace: node.NamespaceName, Type: node.NodeTransformType, Id: target.Name, Options: &v1alpha1.DestroyOptions{},
		})
		require.Error(t, err)
		assert.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)

		err = api.NewClientState(conn).AddFinalizer(t.Context(), node.NewNodeTransform(node.NamespaceName, target.Name).Metadata(), "test")
		require.ErrorContains(t, err, "read-only")

		r := runCcmctl(t, bin, endpoint, "get", "nt", target.Name, "-o", "yaml")
		require.Equal(t, 0, r.code, r.stderr)
		assert.NotContains(t, r.stdout, "- test\n", "the finalizer was not added")

		_, err = env.Clientset().CoreV1().Nodes().Get(t.Context(), target.Name, metav1.GetOptions{})
		require.NoError(t, err)
	})
}

func TestCcmctlOverMutualTLS(t *testing.T) {
	machines := fleet("ctltls", 1, 22)
	_, srv := talossim.StartTest(t, machines)

	pki, err := talossim.NewPKI()
	require.NoError(t, err)

	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }

	for name, data := range map[string][]byte{
		"ca.crt": pki.CAPEM, "server.crt": pki.ServerCertPEM, "server.key": pki.ServerKeyPEM,
		"client.crt": pki.ClientCertPEM, "client.key": pki.ClientKeyPEM,
	} {
		require.NoError(t, os.WriteFile(path(name), data, 0o600))
	}

	endpoint := "tcp://127.0.0.1:" + strconv.Itoa(freePort(t))

	startCCM(t, srv, app.Options{
		APIListen:   endpoint,
		APITLSCert:  path("server.crt"),
		APITLSKey:   path("server.key"),
		APIClientCA: path("ca.crt"),
	})

	bin := buildCcmctl(t)

	var r result

	testenv.Eventually(t, 30*time.Second, 200*time.Millisecond, "a client with a certificate from the CA", func(context.Context) error {
		r = runCcmctl(t, bin, "--endpoint", endpoint, "--tls-ca", path("ca.crt"), "--tls-cert", path("client.crt"), "--tls-key", path("client.key"), "get", "rd")
		if r.code != 0 {
			return fmt.Errorf("exit %d: %s", r.code, r.stderr)
		}

		return nil
	})
	assert.Contains(t, r.stdout, "nodetransforms.node.tccm.dev")

	oneLineError(t, runCcmctl(t, bin, "--endpoint", endpoint, "--tls-ca", path("ca.crt"), "get", "rd"), "cannot reach talos-ccm at "+endpoint+": ")
}

// rulesFile is a config file with a rule that selects the machines of platform (the rule in force, changed)
// and one that selects none.
func rulesFile(platform string) string {
	return `transformations:
  - name: db-team
    nodeSelector:
      - matchExpressions:
          - key: platform
            operator: In
            values: [` + platform + `]
    labels:
      team: analytics
    annotations:
      example.com/zone: "{{ .Zone }}"
    taints:
      dedicated: db:NoSchedule
  - name: elsewhere
    nodeSelector:
      - matchExpressions:
          - key: platform
            operator: In
            values: [no-such-platform]
    labels:
      team: none
`
}

// freePort returns a TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()

	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	port := l.Addr().(*net.TCPAddr).Port
	require.NoError(t, l.Close())

	return port
}

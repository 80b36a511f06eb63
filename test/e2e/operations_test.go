package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// freeAddress returns a loopback address with a port that was free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)

	addr := lis.Addr().String()
	require.NoError(t, lis.Close())

	return addr
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()

	resp, err := http.Get(url) //nolint:noctx
	if err != nil {
		return 0, err.Error()
	}

	defer resp.Body.Close() //nolint:errcheck

	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)

	return resp.StatusCode, string(body)
}

// metricValue sums the samples of a metric whose label set contains every one of labels.
func metricValue(exposition, name string, labels ...string) float64 {
	sum := 0.0
	scanner := bufio.NewScanner(strings.NewReader(exposition))

	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}

		matches := true

		for _, l := range labels {
			if !strings.Contains(line, l) {
				matches = false
			}
		}

		if !matches {
			continue
		}

		fields := strings.Fields(line)

		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err == nil {
			sum += v
		}
	}

	return sum
}

func TestMetricsAndProbes(t *testing.T) {
	machines := fleet("metrics", 5, 41)
	_, srv := talossim.StartTest(t, machines)

	addr := freeAddress(t)

	// Plain HTTP on localhost; the secure default (HTTPS, tokens checked by the apiserver) is tested by
	// internal/delegatedauth and test/deploy.
	startCCM(t, srv, app.Options{MetricsBindAddress: addr, HealthProbeBindAddress: addr, MetricsInsecure: true})

	testenv.Eventually(t, 20*time.Second, 100*time.Millisecond, "readyz once caches are synced", func(context.Context) error {
		if code, body := httpGet(t, "http://"+addr+"/readyz"); code != http.StatusOK {
			return fmt.Errorf("status %d: %s", code, body)
		}

		return nil
	})

	code, _ := httpGet(t, "http://"+addr+"/healthz")
	require.Equal(t, http.StatusOK, code)

	joinNodes(t, machines)
	waitNodes(t, names(machines), 30*time.Second, initialized)

	code, body := httpGet(t, "http://"+addr+"/metrics")
	require.Equal(t, http.StatusOK, code)

	require.GreaterOrEqual(t, metricValue(body, "talos_ccm_node_initialization_seconds_count"), float64(len(machines)))
	require.Positive(t, metricValue(body, "talos_ccm_kubernetes_requests_total", `verb="update"`, `resource="nodes"`, `code="200"`))
	require.Positive(t, metricValue(body, "talos_ccm_kubernetes_requests_total", `verb="patch"`, `resource="nodes/status"`))
	require.Positive(t, metricValue(body, "talos_ccm_talos_api_calls_total", `call="get"`, `result="ok"`))
	require.Positive(t, metricValue(body, "talos_ccm_talos_api_calls_total", `call="watch"`))
	require.Positive(t, metricValue(body, "talos_ccm_talos_sessions"))
}

// buildCCM builds the talos-ccm binary for tests that run it as a process.
func buildCCM(t *testing.T) string {
	t.Helper()

	bin := filepath.Join(t.TempDir(), "talos-ccm")

	cmd := exec.Command("go", "build", "-o", bin, "github.com/talos-ccm/talos-ccm/cmd/talos-ccm")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, string(out))

	return bin
}

// startCCMProcess runs the talos-ccm binary bin with args, its output in a log file named after name; the
// process is killed when the test ends (and with the test process), and if the test failed, the end of its
// log is shown.
func startCCMProcess(t *testing.T, bin, name string, args ...string) *exec.Cmd {
	t.Helper()

	logFile, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	require.NoError(t, err)

	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, cmd.Start())

	t.Cleanup(func() {
		cmd.Process.Kill() //nolint:errcheck
		cmd.Wait()         //nolint:errcheck
		logFile.Close()    //nolint:errcheck

		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("%s log:\n%s", name, tail(string(b), 40))
		}
	})

	return cmd
}

func TestLeaderElectionFailover(t *testing.T) {
	machines := fleet("leader", 5, 51)
	_, srv := talossim.StartTest(t, machines)

	bin := buildCCM(t)
	kubeconfig := env.KubeconfigFile(t)
	lease := "talos-ccm-failover"

	start := func(name string) *exec.Cmd {
		return startCCMProcess(t, bin, name,
			"--kubeconfig", kubeconfig,
			"--talosconfig", srv.TalosconfigPath(),
			"--state-dir", "",
			"--api-listen", "",
			"--metrics-bind-address", "0",
			"--health-probe-bind-address", "0",
			"--leader-elect",
			"--leader-elect-resource-name", lease,
			"--leader-elect-lease-duration", "4s",
			"--leader-elect-renew-deadline", "3s",
			"--leader-elect-retry-period", "500ms",
		)
	}

	first := start("first")

	firstLeader := waitLeader(t, lease, 30*time.Second, "")

	start("second")

	joinNodes(t, machines)
	waitNodes(t, names(machines), 30*time.Second, initialized)
	require.Equal(t, firstLeader, leaseHolder(t, lease), "the first process keeps the lease while alive")

	versions := map[string]string{}

	for _, m := range machines {
		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), m.Name, metav1.GetOptions{})
		require.NoError(t, err)

		versions[m.Name] = n.ResourceVersion
	}

	killed := time.Now()

	require.NoError(t, first.Process.Signal(syscall.SIGKILL))

	waitLeader(t, lease, 15*time.Second, firstLeader)

	takeover := time.Since(killed)
	t.Logf("the second process leads %s after the leader was killed", takeover.Round(100*time.Millisecond))
	require.Less(t, takeover, 4*time.Second+3*time.Second, "takeover within the lease duration (plus retry slack)")

	// The new leader reads everything and finds nothing to change: no Node is written again while it does.
	testenv.Consistently(t, 4*time.Second, 200*time.Millisecond, "no Node written again after the failover", func(ctx context.Context) error {
		return testenv.Every(names(machines), func(name string) error {
			n, err := env.Clientset().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}

			if n.ResourceVersion != versions[name] {
				return fmt.Errorf("written again: resourceVersion %s, was %s", n.ResourceVersion, versions[name])
			}

			return nil
		})
	})

	// And it works: a label of talos-ccm's removed by someone else comes back.
	waitLabelRestored(t, machines[0].Name, 15*time.Second)
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}

	return regexp.MustCompile(`\t`).ReplaceAllString(strings.Join(all, "\n"), " ")
}

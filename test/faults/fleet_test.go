//go:build faults

package faults_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/talossim"

	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// machinesFor generates count machines named PREFIX-<generated name>: tests sharing the control plane never
// see each other's Nodes.
func machinesFor(prefix string, count int, seed int64) []talossim.Machine {
	machines := talossim.Generate(count, seed)

	for i := range machines {
		machines[i].Name = prefix + "-" + machines[i].Name
	}

	return machines
}

func machineNames(machines []talossim.Machine) []string {
	out := make([]string, 0, len(machines))

	for _, m := range machines {
		out = append(out, m.Name)
	}

	return out
}

// joinKubelets registers the machines' Nodes and serves their kubelet certificate requests until the test
// ends, as kubelets started with --cloud-provider=external do; then it deletes their Nodes.
func joinKubelets(t *testing.T, c cluster, machines []talossim.Machine) *talossim.Kubelets {
	t.Helper()

	return talossim.RunTestKubelets(t, c.config, machines)
}

// cleanupPrefix deletes, when the test ends, every Node whose name starts with PREFIX- and every certificate
// request of those nodes, so that the next test's talos-ccm does not find them. Registered before the
// kubelets start, it runs after they stopped (cleanups run last in, first out).
func cleanupPrefix(t *testing.T, c cluster, prefix string) {
	t.Helper()

	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()

		var deletions []func()

		nodes, err := c.clientset.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("failed to list the Nodes to delete: %v", err)

			return
		}

		for _, n := range nodes.Items {
			if strings.HasPrefix(n.Name, prefix+"-") {
				deletions = append(deletions, func() {
					c.clientset.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}) //nolint:errcheck
				})
			}
		}

		csrs, err := c.clientset.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("failed to list the certificate requests to delete: %v", err)

			return
		}

		for _, csr := range csrs.Items {
			if strings.HasPrefix(csr.Spec.Username, nodeUserPrefix+prefix+"-") {
				deletions = append(deletions, func() {
					c.clientset.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{}) //nolint:errcheck
				})
			}
		}

		runConcurrently(deletions, 16)
	})
}

// runConcurrently runs fns with at most workers at once.
func runConcurrently(fns []func(), workers int) {
	var wg sync.WaitGroup

	work := make(chan func())

	for range workers {
		wg.Go(func() {
			for fn := range work {
				fn()
			}
		})
	}

	for _, fn := range fns {
		work <- fn
	}

	close(work)
	wg.Wait()
}

// expectedProviderID is the providerID a machine's Node must end with, from the machine's facts alone: the
// one its PlatformMetadata gives, else talos://PLATFORM/NODE-IP (platform metal without PlatformMetadata,
// the first IPv4 node IP, else the first node IP).
func expectedProviderID(m talossim.Machine) string {
	if !m.NoPlatformMetadata && m.ProviderID != "" {
		return m.ProviderID
	}

	platform := m.Platform
	if m.NoPlatformMetadata {
		platform = "metal"
	}

	ips := slices.Clone(m.NodeIPs)
	slices.SortStableFunc(ips, func(a, b netip.Addr) int {
		switch {
		case a.Is4() == b.Is4():
			return 0
		case a.Is4():
			return -1
		default:
			return 1
		}
	})

	return "talos://" + platform + "/" + ips[0].String()
}

// startSim serves the machines on a TLS endpoint (talosconfig in a temporary directory) and a unix socket
// until the test ends, logging only its warnings and errors.
func startSim(t *testing.T, machines []talossim.Machine) (*talossim.Fleet, *talossim.Server) {
	t.Helper()

	fleet, err := talossim.NewFleet(machines)
	if err != nil {
		t.Fatalf("failed to build the fleet: %v", err)
	}

	srv, err := talossim.StartServer(fleet, talossim.ServerConfig{
		Listen:          "127.0.0.1:0",
		Unix:            filepath.Join(shortTempDir(t), "apid.sock"),
		TalosconfigPath: filepath.Join(t.TempDir(), "talosconfig"),
	}, zaptest.NewLogger(t, zaptest.Level(zapcore.WarnLevel)))
	if err != nil {
		t.Fatalf("failed to start talos-sim: %v", err)
	}

	t.Cleanup(srv.Stop)

	return fleet, srv
}

// errNoRequest is what kubeletRequests says of a kubelet that has not submitted its request yet.
var errNoRequest = errors.New("no certificate request")

// kubeletRequests waits until the kubelet of every named node has submitted its serving certificate request,
// and returns their names.
func kubeletRequests(t *testing.T, kubelets *talossim.Kubelets, names []string, timeout time.Duration) []string {
	t.Helper()

	requests := map[string]string{}

	testenv.Eventually(t, timeout, 100*time.Millisecond, "every kubelet submits its certificate request", func(context.Context) error {
		return testenv.Every(names, func(name string) error {
			times, _ := kubelets.Times(name)
			if times.CSRName == "" {
				return errNoRequest
			}

			requests[name] = times.CSRName

			return nil
		})
	})

	out := make([]string, 0, len(names))
	for _, name := range names {
		out = append(out, requests[name])
	}

	return out
}

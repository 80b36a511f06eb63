package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// The flood scenario: one node files many serving certificate requests while it waits to be initialized,
// then its Node changes again and again; each time, another node's request is measured from its creation
// to its approval. The same is measured before the flood, in the same run, on the same control plane:
// the ratio says how much one node's flood delays another's approval (1x: not at all).
const (
	flooderNode = "flood-0"
	quietNode   = "quiet-0"
	// floodRounds is how many Node changes (and measured requests) each phase has.
	floodRounds = 10
	// taintUninitialized keeps the flooder's requests pending (rule 6) until the first change removes it.
	taintUninitialized = "node.cloudprovider.kubernetes.io/uninitialized"
)

// floodResult is what the flood scenario measured.
type floodResult struct {
	// before and during are the quiet node's approval latencies without and with the flood.
	before, during latencies
	requests       int
	// filed is how long the flooder took to file its requests (the apiserver's part, not talos-ccm's).
	filed time.Duration
	// hostile is the hostile phase's result, nil when it did not run.
	hostile *hostileResult
}

func runFlood(ctx context.Context, opts options, requests int) (*floodResult, error) {
	res := &floodResult{requests: requests}

	step("starting a fresh control plane")

	cp, stopControlPlane, err := testenv.StartShared()
	if err != nil {
		return nil, err
	}

	defer stopControlPlane()

	// The requests are filed as fast as the apiserver takes them, as the floor writes.
	admin := rateLimited(cp.Config, 0, 0)

	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}

	for _, name := range []string{flooderNode, quietNode} {
		if err = createFloodNode(ctx, client, name, name == flooderNode); err != nil {
			return nil, err
		}
	}

	work, err := os.MkdirTemp("", "talos-ccm-bench-flood")
	if err != nil {
		return nil, err
	}

	defer os.RemoveAll(work) //nolint:errcheck

	stopCCM, metricsAddr, pid, err := startFloodCCM(ctx, opts, cp, work)
	if err != nil {
		return nil, err
	}

	defer stopCCM()

	// The first approval also waits for talos-ccm to start: it is not measured.
	if _, err = approvalLatency(ctx, admin, quietNode); err != nil {
		return nil, err
	}

	step(fmt.Sprintf("before the flood: %d changes of Node %s, each with a request of %s", floodRounds, flooderNode, quietNode))

	if res.before, err = floodPhase(ctx, client, admin, "before"); err != nil {
		return nil, err
	}

	// Before the flood, whose requests talos-ccm decides again for a while: its CPU is the hostile ones'.
	if opts.hostile > 0 {
		step(fmt.Sprintf("%d kubelets file a request with a huge key each, then %s one", opts.hostile, quietNode))

		if res.hostile, err = hostilePhase(ctx, admin, pid, opts.hostile); err != nil {
			return nil, err
		}

		res.hostile.before = res.before.p50
	}

	step(fmt.Sprintf("%s files %d requests while it waits to be initialized", flooderNode, requests))

	// The flood is filed with the Node uninitialized again, so that every request waits.
	if err = setUninitialized(ctx, client, flooderNode, true); err != nil {
		return nil, err
	}

	seen, err := scrape(metricsAddr)
	if err != nil {
		return nil, err
	}

	start := time.Now()

	names := make([]string, requests)
	for i := range names {
		names[i] = fmt.Sprint(i)
	}

	err = parallel(ctx, names, opts.floor.concurrency, func(ctx context.Context, _ string) error {
		_, err := submitServingCSR(ctx, admin, flooderNode)

		return err
	})
	if err != nil {
		return nil, err
	}

	res.filed = time.Since(start)

	// The flood is decided as talos-ccm sees it: every request has its first decision (a wait for the newest,
	// a denial as superseded for the others).
	if err = waitDecisions(ctx, metricsAddr, sum(seen, `talos_ccm_csr_decisions_total{verdict="wait"}`)+sum(seen, `talos_ccm_csr_decisions_total{verdict="deny"}`)+float64(requests)); err != nil {
		return nil, err
	}

	step(fmt.Sprintf("filed in %s; %d changes of Node %s, each with a request of %s", res.filed.Round(time.Millisecond), floodRounds, flooderNode, quietNode))

	if res.during, err = floodPhase(ctx, client, admin, "during"); err != nil {
		return nil, err
	}

	return res, nil
}

// floodPhase changes the flooder's Node floodRounds times (the first change initializes it), and each time
// measures the approval of a request of the quiet node filed at once.
func floodPhase(ctx context.Context, client kubernetes.Interface, admin *rest.Config, phase string) (latencies, error) {
	per := make([]time.Duration, 0, floodRounds)

	for round := range floodRounds {
		var err error

		if round == 0 {
			err = setUninitialized(ctx, client, flooderNode, false)
		} else {
			err = labelNode(ctx, client, flooderNode, "bench.tccm.dev/round", fmt.Sprintf("%s-%d", phase, round))
		}

		if err != nil {
			return latencies{}, err
		}

		latency, err := approvalLatency(ctx, admin, quietNode)
		if err != nil {
			return latencies{}, err
		}

		per = append(per, latency)
	}

	return summarize(per, nil), nil
}

// waitDecisions waits until talos-ccm has counted at least want wait and deny verdicts (a request counts at
// its first decision, and once more when it waited and is then denied as superseded: the count can be
// reached a little before every request is decided).
func waitDecisions(ctx context.Context, metricsAddr string, want float64) error {
	deadline := time.Now().Add(2 * time.Minute)

	for {
		series, err := scrape(metricsAddr)
		if err != nil {
			return err
		}

		if sum(series, `talos_ccm_csr_decisions_total{verdict="wait"}`)+sum(series, `talos_ccm_csr_decisions_total{verdict="deny"}`) >= want {
			return nil
		}

		if time.Now().After(deadline) {
			return fmt.Errorf("talos-ccm has not decided about the flood within 2m")
		}

		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// startFloodCCM runs talos-ccm as the CSR approver alone (no Talos API), and returns how to stop it, the
// address of its metrics and its process id.
func startFloodCCM(ctx context.Context, opts options, cp *testenv.Env, work string) (func(), string, int, error) {
	kubeconfig := filepath.Join(work, "kubeconfig")
	if err := cp.WriteKubeconfig(kubeconfig); err != nil {
		return nil, "", 0, err
	}

	metricsAddr, err := freeAddress()
	if err != nil {
		return nil, "", 0, err
	}

	ccm := ccmCommand(ctx, opts, kubeconfig, work, metricsAddr, "--controllers", "csr-approval")

	// No talosconfig: the approver runs alone, and its decisions are all there is to measure.
	ccm.Env = append(os.Environ(), "TALOSCONFIG=")

	_, stop, err := startCCM(ccm, filepath.Join(opts.outDir, "talos-ccm-flood.log"))
	if err != nil {
		return nil, "", 0, err
	}

	return stop, metricsAddr, ccm.Process.Pid, nil
}

// createFloodNode creates an initialized Node (uninitialized with the taint) whose only address is its
// name, as another cloud controller manager would leave it.
func createFloodNode(ctx context.Context, client kubernetes.Interface, name string, uninitialized bool) error {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if uninitialized {
		node.Spec.Taints = []corev1.Taint{{Key: taintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}

	created, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("failed to create node %s: %w", name, err)
	}

	created.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}

	if _, err = client.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("failed to set the addresses of node %s: %w", name, err)
	}

	return nil
}

func setUninitialized(ctx context.Context, client kubernetes.Interface, name string, uninitialized bool) error {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to read node %s: %w", name, err)
	}

	node.Spec.Taints = nil
	if uninitialized {
		node.Spec.Taints = []corev1.Taint{{Key: taintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}

	if _, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("failed to update node %s: %w", name, err)
	}

	return nil
}

func labelNode(ctx context.Context, client kubernetes.Interface, name, key, value string) error {
	node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("failed to read node %s: %w", name, err)
	}

	if node.Labels == nil {
		node.Labels = map[string]string{}
	}

	node.Labels[key] = value

	if _, err = client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("failed to update node %s: %w", name, err)
	}

	return nil
}

// approvalLatency files a serving certificate request of node and returns the time from its creation to
// its approval, as a watch on it sees them.
func approvalLatency(ctx context.Context, admin *rest.Config, node string) (time.Duration, error) {
	start := time.Now()

	created, err := submitServingCSR(ctx, admin, node)
	if err != nil {
		return 0, err
	}

	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return 0, err
	}

	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	w, err := client.CertificatesV1().CertificateSigningRequests().Watch(wctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", created.Name).String(),
		ResourceVersion: created.ResourceVersion,
	})
	if err != nil {
		return 0, fmt.Errorf("failed to watch csr %s: %w", created.Name, err)
	}

	defer w.Stop()

	for ev := range w.ResultChan() {
		csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok || ev.Type == watch.Error {
			continue
		}

		for _, c := range csr.Status.Conditions {
			switch c.Type {
			case certificatesv1.CertificateApproved:
				return time.Since(start), nil
			case certificatesv1.CertificateDenied:
				return 0, fmt.Errorf("csr %s of %s denied: %s", created.Name, node, c.Message)
			}
		}
	}

	return 0, fmt.Errorf("csr %s of %s not approved within 2m", created.Name, node)
}

// submitServingCSR files a kubelet serving certificate request for node's name, as its kubelet.
func submitServingCSR(ctx context.Context, admin *rest.Config, node string) (*certificatesv1.CertificateSigningRequest, error) {
	csr, err := talossim.NewServingCSR(node, []string{node}, nil)
	if err != nil {
		return nil, err
	}

	return createCSR(ctx, admin, node, csr)
}

// createCSR files csr as node's kubelet (impersonated, so that the apiserver sets spec.username).
func createCSR(ctx context.Context, admin *rest.Config, node string, csr *certificatesv1.CertificateSigningRequest) (*certificatesv1.CertificateSigningRequest, error) {
	client, err := kubernetes.NewForConfig(talossim.NodeConfig(admin, node))
	if err != nil {
		return nil, err
	}

	created, err := client.CertificatesV1().CertificateSigningRequests().Create(ctx, csr, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("failed to create a csr of %s: %w", node, err)
	}

	return created, nil
}

// reportFlood prints the flood scenario's ratios.
func reportFlood(w io.Writer, r *floodResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)

	name := fmt.Sprintf("one node files %d CSRs", r.requests)

	fmt.Fprintln(tw, "\nSCENARIO\tMEASURE\tDURING THE FLOOD\tBEFORE\tRATIO")
	fmt.Fprintf(tw, "%s\tanother node's CSR approval p50\t%s\t%s\t%.2fx\n", name, round(r.during.p50), round(r.before.p50), ratio(r.during.p50, r.before.p50))
	fmt.Fprintf(tw, "%s\tanother node's CSR approval max\t%s\t%s\t%.2fx\n", name, round(r.during.max), round(r.before.max), ratio(r.during.max, r.before.max))
	fmt.Fprintf(tw, "%s\tfiling the flood (the apiserver's, not talos-ccm)\t%s\t-\t-\n", name, round(r.filed))

	tw.Flush() //nolint:errcheck

	if r.hostile != nil {
		reportHostile(w, r.hostile)
	}
}

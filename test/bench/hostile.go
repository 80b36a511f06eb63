package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"runtime"
	"syscall"
	"text/tabwriter"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testcsr"
)

// The hostile phase of the flood scenario (issue 31): kubelets each file a serving certificate request
// signed with an RSA key of more than 65,536 bits, whose signature the apiserver takes, as it verifies, and
// another node files its own at once. Verifying one such signature costs over half a second of CPU, and
// the cost grows with the square of the key's size; talos-ccm denies them for their key without verifying
// them. Its CPU from the first request's filing to the last one's denial, divided by the number of
// requests, bounds what one costs it; the other node's approval says whether they delay anyone. The
// apiserver verifies each signature itself, when the request is created and again at each update of it
// (talos-ccm's denial included): its CPU over the phase is reported beside, as what the phase's wall times
// are made of.
const (
	// hostileKeyPrimes primes of hostileKeyPrimeBits bits make a key of more than 65,536 bits, which a
	// kubelet makes in seconds and signs with at the cost of its small primes.
	hostileKeyPrimes    = 64
	hostileKeyPrimeBits = 1025
	// hostileNodePrefix names the kubelets that file the hostile requests: one request each, so that each
	// is decided for its key rather than denied as superseded by the next, as one kubelet's would be.
	hostileNodePrefix = "hostile-"
)

// hostileResult is what the hostile phase measured.
type hostileResult struct {
	requests int
	keyBits  int
	// cpu is talos-ccm's CPU time from the first hostile request's filing to the last one's denial.
	cpu time.Duration
	// verify is the CPU time the harness took to verify one hostile request's signature: what talos-ccm
	// would spend on each if it verified them.
	verify time.Duration
	// approval is the other node's approval latency, its request filed right after the hostile ones.
	approval time.Duration
	// filed is the time the apiserver took to take the hostile requests; denied the time from the first
	// one's filing to the last one's denial.
	filed, denied time.Duration
	// others is the CPU of the control plane and of the harness over the phase.
	others cpuShares
	// before is the other node's approval p50 before the flood, in the same run: the ratio's floor.
	before time.Duration
}

// hostilePhase files requests hostile requests, each from a kubelet of its own, then a request of the
// quiet node, and measures them against talos-ccm, whose process is pid.
func hostilePhase(ctx context.Context, admin *rest.Config, pid, requests int) (*hostileResult, error) {
	key, err := testcsr.NewMultiPrimeKey(hostileKeyPrimes, hostileKeyPrimeBits)
	if err != nil {
		return nil, err
	}

	res := &hostileResult{requests: requests, keyBits: key.Bits()}

	// The requests are signed before anything is measured: the harness's CPU is not talos-ccm's.
	csrs := make(map[string]*certificatesv1.CertificateSigningRequest, requests)
	nodes := make([]string, requests)

	for i := range nodes {
		nodes[i] = fmt.Sprint(hostileNodePrefix, i)

		request, err := testcsr.ServingRequest(nodes[i], key)
		if err != nil {
			return nil, err
		}

		csrs[nodes[i]] = &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-hostile-"},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    request,
				SignerName: talossim.KubeletServingSigner,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
			},
		}
	}

	if res.verify, err = verifyCPU(csrs[nodes[0]].Spec.Request); err != nil {
		return nil, err
	}

	client, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}

	_, cpuBefore := processUsage(pid)
	othersBefore := readCPUShares()
	start := time.Now()
	names := make(map[string]bool, requests)
	filed := make(chan string, requests)

	err = parallel(ctx, nodes, requests, func(ctx context.Context, node string) error {
		created, err := createCSR(ctx, admin, node, csrs[node])
		if err == nil {
			filed <- created.Name
		}

		return err
	})
	if err != nil {
		return nil, err
	}

	res.filed = time.Since(start)

	close(filed)

	for name := range filed {
		names[name] = true
	}

	if res.approval, err = approvalLatency(ctx, admin, quietNode); err != nil {
		return nil, err
	}

	message, err := awaitDenied(ctx, client, names)
	if err != nil {
		return nil, err
	}

	res.denied = time.Since(start)
	_, cpuAfter := processUsage(pid)
	res.cpu = seconds(cpuAfter - cpuBefore)
	res.others = readCPUShares().since(othersBefore)

	step(fmt.Sprintf("denied in %s, talos-ccm's CPU %s; one denial says: %s", round(res.denied), round(res.cpu), message))

	return res, nil
}

// verifyCPU is the CPU time this thread takes to verify the signature of request (PEM): what a hostile
// request would cost talos-ccm if it verified it.
func verifyCPU(request []byte) (time.Duration, error) {
	block, _ := pem.Decode(request)
	if block == nil {
		return 0, errors.New("failed to decode the hostile request")
	}

	req, err := x509.ParseCertificateRequest(block.Bytes)
	if err != nil {
		return 0, fmt.Errorf("failed to parse the hostile request: %w", err)
	}

	// The thread's own CPU time, not the process's, which the harness's other goroutines add to.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	before, err := threadCPU()
	if err != nil {
		return 0, err
	}

	if err = req.CheckSignature(); err != nil {
		return 0, fmt.Errorf("failed to verify the hostile request's signature: %w", err)
	}

	after, err := threadCPU()
	if err != nil {
		return 0, err
	}

	return after - before, nil
}

func threadCPU() (time.Duration, error) {
	var usage syscall.Rusage

	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &usage); err != nil {
		return 0, fmt.Errorf("failed to read the thread's CPU time: %w", err)
	}

	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano()), nil
}

// awaitDenied waits until every request of names is denied, as a watch of all requests sees them, and
// returns one denial's message. An approval of any of them is an error: the measure would be wrong.
func awaitDenied(ctx context.Context, client kubernetes.Interface, names map[string]bool) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	// Resource version "0" starts with the requests as they are, then their changes.
	w, err := client.CertificatesV1().CertificateSigningRequests().Watch(wctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return "", fmt.Errorf("failed to watch csrs: %w", err)
	}

	defer w.Stop()

	pending := len(names)
	message := ""

	for ev := range w.ResultChan() {
		csr, ok := ev.Object.(*certificatesv1.CertificateSigningRequest)
		if !ok || !names[csr.Name] {
			continue
		}

		denial, err := hostileDecision(csr)
		if err != nil {
			return "", err
		}

		if denial == nil {
			continue
		}

		names[csr.Name] = false
		pending--
		message = denial.Message

		if pending == 0 {
			return message, nil
		}
	}

	return "", fmt.Errorf("%d hostile csrs not denied within 2m", pending)
}

// hostileDecision returns a hostile request's Denied condition, nil while it is undecided, and an error
// when it was approved or failed.
func hostileDecision(csr *certificatesv1.CertificateSigningRequest) (*certificatesv1.CertificateSigningRequestCondition, error) {
	for i, c := range csr.Status.Conditions {
		switch c.Type {
		case certificatesv1.CertificateDenied:
			return &csr.Status.Conditions[i], nil
		case certificatesv1.CertificateApproved, certificatesv1.CertificateFailed:
			return nil, fmt.Errorf("hostile csr %s of %s: %s, not denied: %s", csr.Name, csr.Spec.Username, c.Type, c.Message)
		}
	}

	return nil, nil
}

// reportHostile prints the hostile phase's figures.
func reportHostile(w io.Writer, r *hostileResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)

	name := fmt.Sprintf("%d kubelets file a CSR with an RSA %d-bit key", r.requests, r.keyBits)
	perRequest := r.cpu / time.Duration(r.requests)

	fmt.Fprintln(tw, "\nSCENARIO\tMEASURE\tTALOS-CCM\tCOMPARED WITH\tRATIO")
	fmt.Fprintf(tw, "%s\ttalos-ccm CPU per hostile request\t%s\t%s (verifying one signature)\t%.3fx\n", name, round(perRequest), round(r.verify), ratio(perRequest, r.verify))
	fmt.Fprintf(tw, "%s\tanother node's CSR approval, filed right after them\t%s\t%s (p50 before the flood)\t%.2fx\n", name, round(r.approval), round(r.before), ratio(r.approval, r.before))
	fmt.Fprintf(tw, "%s\tfiled / all of them denied within (the apiserver verifies each at its creation and denial)\t%s / %s\t-\t-\n", name, round(r.filed), round(r.denied))
	fmt.Fprintf(tw, "%s\tCPU of apiserver+etcd / of the harness over the phase\t%s\t-\t-\n", name, r.others)

	tw.Flush() //nolint:errcheck
}

package e2e_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	certificatesv1client "k8s.io/client-go/kubernetes/typed/certificates/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
	"github.com/talos-ccm/talos-ccm/internal/testcsr"
	"github.com/talos-ccm/talos-ccm/internal/testenv"
)

// Eight nodes file requests signed with an RSA key of more than 65,536 bits (verifying one signature costs
// over half a second of CPU, and the cost grows with the square of the size); another node's request filed
// right after them is approved within 2 s, the hostile ones are denied for their key, and denying them costs
// talos-ccm a small, bounded amount of CPU: their signatures are never verified.
func TestHostileCSRHugeKeys(t *testing.T) {
	const (
		quiet   = "hk-quiet"
		warm    = "hk-warm"
		hostile = 8
	)

	createCSRNode(t, quiet, false)
	startCSRApprover(t, warm, app.Options{})

	// One key for every hostile node; Go verifies what it signs, at the cost the attack is about.
	key, err := testcsr.NewMultiPrimeKey(64, 1025)
	require.NoError(t, err)

	bits := fmt.Sprintf("RSA %d bits", key.Bits())

	requests := make([][]byte, hostile)
	for i := range requests {
		requests[i], err = testcsr.ServingRequest(fmt.Sprintf("hk-hostile-%d", i), key)
		require.NoError(t, err)
	}

	// What one verification of a hostile signature costs this process here, now: the bound below scales
	// with the machine.
	verify := verifyCPU(t, requests[0])

	cpu := processCPU(t)

	names := make([]string, hostile)

	var wg sync.WaitGroup

	for i := range names {
		wg.Go(func() { names[i] = createRawCSR(t, fmt.Sprintf("hk-hostile-%d", i), requests[i]) })
	}

	wg.Wait()

	filed := time.Now()
	legit := submitCSR(t, quiet, servingRequest{dns: []string{quiet}})

	cond := waitCSRDecided(t, legit, 30*time.Second)
	approvedIn := time.Since(filed)

	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, cond.Message)
	assert.Less(t, approvedIn, 2*time.Second, "the legitimate request behind the hostile ones")

	for _, name := range names {
		cond = waitCSRDecided(t, name, 30*time.Second)
		require.Equal(t, certificatesv1.CertificateDenied, cond.Type, cond.Message)
		assert.Contains(t, cond.Message, bits)
		assert.Contains(t, cond.Message, "the signature is not verified")
	}

	// The whole test process (talos-ccm, its clients and the test's own) used this much CPU from the first
	// hostile request to the last denial: 0.2 to 0.75 s on two busy cores, while one verification measured
	// 0.2 to 0.4 s. Verifying the eight signatures would add eight verifications to that: less than six
	// leaves room for the process's own work, and fails if talos-ccm verified them.
	used := processCPU(t) - cpu
	t.Logf("legitimate request approved in %s; CPU for %d hostile requests: %s (%s each at most); one verification: %s",
		approvedIn, hostile, used, used/hostile, verify)
	assert.Less(t, used, 6*verify, "CPU spent while the hostile requests were denied, against six verifications of their signatures")
}

// verifyCPU is the CPU this process spends verifying the signature of request, a certificate request in PEM,
// once.
func verifyCPU(t *testing.T, request []byte) time.Duration {
	t.Helper()

	block, _ := pem.Decode(request)
	require.NotNil(t, block)

	csr, err := x509.ParseCertificateRequest(block.Bytes)
	require.NoError(t, err)

	start := processCPU(t)

	require.NoError(t, csr.CheckSignature())

	return processCPU(t) - start
}

// One kubelet, whose Node is never initialized, files 300 large requests (about 270 KB each, more than
// any request that can be approved, as fast as the apiserver takes them). talos-ccm denies each, as
// superseded or, when it was the newest at its decision, for its size, so that none stays pending; and it
// mirrors no more than the first 64 KiB of each. Its heap grows by less than 96 MiB: what stays is the
// in-memory state's history of mirror versions for its watchers (1,024 events of the type, each version at
// most 64 KiB of request), whatever the number of requests. Before, the superseded requests stayed pending
// for a day, each held whole twice (informer and mirror) and in the history: over 300 MiB for these.
func TestHostileCSRMemory(t *testing.T) {
	const (
		flooder  = "mem-flood"
		warm     = "mem-warm"
		requests = 300
		padBytes = 200_000
		// heapBound bounds how much talos-ccm's heap may grow by once the flood is decided.
		heapBound = 96 << 20
	)

	createCSRNode(t, flooder, true)

	socket := filepath.Join(socketDir(t), "ccm.sock")
	startCSRApprover(t, warm, app.Options{APIListen: socket})
	st := stateClient(t, socket)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)

	request, err := testcsr.ServingRequest(flooder, key, testcsr.WithPadding(padBytes))
	require.NoError(t, err)

	before := heapAlloc()

	names := make([]string, requests)
	work := make(chan int)

	var wg sync.WaitGroup

	for range 4 {
		wg.Go(func() {
			for i := range work {
				names[i] = createRawCSR(t, flooder, request)
			}
		})
	}

	for i := range names {
		work <- i
	}

	close(work)
	wg.Wait()

	// The flood is decided when talos-ccm mirrors no pending request of the flooder any more.
	testenv.Eventually(t, 3*time.Minute, 500*time.Millisecond, "no pending request of "+flooder+" left in talos-ccm's mirror", func(ctx context.Context) error {
		n, err := mirroredRequests(ctx, st, talossim.NodeUserPrefix+flooder)
		if err == nil && n != 0 {
			err = fmt.Errorf("%d mirrored", n)
		}

		return err
	})

	grown := int64(heapAlloc()) - int64(before)
	t.Logf("heap grew by %.1f MiB over %d requests of %d bytes", float64(grown)/(1<<20), requests, padBytes)
	assert.Less(t, grown, int64(heapBound), "talos-ccm's heap after the flood")

	// Every request is denied: as superseded, or for its size; the newest for its size.
	var newest *certificatesv1.CertificateSigningRequest

	reasons := map[string]string{}

	for _, name := range names {
		csr, err := env.Clientset().CertificatesV1().CertificateSigningRequests().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)

		if newest == nil || csr.CreationTimestamp.After(newest.CreationTimestamp.Time) ||
			(csr.CreationTimestamp.Equal(&newest.CreationTimestamp) && csr.Name > newest.Name) {
			newest = csr
		}

		for _, c := range csr.Status.Conditions {
			if c.Type == certificatesv1.CertificateDenied {
				reasons[name] = c.Message
			}
		}
	}

	require.Len(t, reasons, requests, "every request is denied")
	assert.Contains(t, reasons[newest.Name], "larger than 65536 bytes")

	superseded := 0

	for name, reason := range reasons {
		if strings.Contains(reason, "superseded by") {
			superseded++
		} else {
			assert.Contains(t, reason, "larger than 65536 bytes", name)
		}
	}

	t.Logf("%d requests denied as superseded, %d for their size", superseded, requests-superseded)
}

// startCSRApprover runs talos-ccm as the CSR approver alone (no Talos API), with opts, and returns once it
// approved a request of the Node warm, which it creates: talos-ccm is up and deciding.
func startCSRApprover(t *testing.T, warm string, opts app.Options) {
	t.Helper()
	t.Setenv("TALOSCONFIG", "")

	createCSRNode(t, warm, false)

	opts.Controllers = []string{"csr-approval"}
	startCCM(t, nil, opts)

	cond := waitCSRDecided(t, submitCSR(t, warm, servingRequest{dns: []string{warm}}), 30*time.Second)
	require.Equal(t, certificatesv1.CertificateApproved, cond.Type, cond.Message)
}

// createCSRNode creates an initialized (or, with uninitialized, tainted) Node whose status names its
// hostname, as a node that files serving certificate requests for it; it is deleted when the test ends.
func createCSRNode(t *testing.T, name string, uninitialized bool) {
	t.Helper()

	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if uninitialized {
		node.Spec.Taints = []corev1.Taint{{Key: kubekeys.TaintUninitialized, Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}

	_, err := env.Clientset().CoreV1().Nodes().Create(t.Context(), node, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Cleanup(func() {
		_ = env.Clientset().CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})

	node, err = env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
	require.NoError(t, err)

	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: name}}
	_, err = env.Clientset().CoreV1().Nodes().UpdateStatus(t.Context(), node, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// createRawCSR files a kubelet serving request with the given PEM bytes as node (impersonated, so that the
// apiserver sets spec.username); it is deleted when the test ends. It may be called from any goroutine.
func createRawCSR(t *testing.T, node string, request []byte) string {
	client, err := certificatesv1client.NewForConfig(talossim.NodeConfig(env.Config, node))
	if err != nil {
		t.Error(err)

		return ""
	}

	created, err := client.CertificateSigningRequests().Create(t.Context(), &certificatesv1.CertificateSigningRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "csr-hostile-"},
		Spec: certificatesv1.CertificateSigningRequestSpec{
			Request:    request,
			SignerName: certificatesv1.KubeletServingSignerName,
			Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Error(err)

		return ""
	}

	// The closure holds the name only, not the request's bytes.
	name := created.Name
	t.Cleanup(func() { deleteCSR(name) })

	return name
}

// mirroredRequests counts the KubeCSRs (pending requests, with their bytes) talos-ccm holds of username.
func mirroredRequests(ctx context.Context, st state.State, username string) (int, error) {
	list, err := safe.StateListAll[*kube.KubeCSR](ctx, st)
	if err != nil {
		return 0, err
	}

	n := 0

	for r := range list.All() {
		if r.TypedSpec().Value.GetUsername() == username {
			n++
		}
	}

	return n, nil
}

// heapAlloc is the live heap of the test process, where talos-ccm runs, after a full collection.
func heapAlloc() uint64 {
	var stats runtime.MemStats

	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&stats)

	return stats.HeapAlloc
}

// processCPU is the CPU time the test process used so far, user and system.
func processCPU(t *testing.T) time.Duration {
	t.Helper()

	var usage syscall.Rusage

	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &usage))

	return time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
}

package k8ssink_test

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/talos-ccm/talos-ccm/internal/k8ssink"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// decidedCSRsRetained returns the heap the informer's cache keeps per approved kubelet serving request once
// n of them are decoded from the protobuf the API server sends and trimmed (TrimCSR), as a fleet joining
// leaves them for the hour before the signer's cleaner deletes them. The encoded requests are made before
// the heap is first measured: only what the cache keeps counts.
func decidedCSRsRetained(tb testing.TB, n int) float64 {
	tb.Helper()

	created := metav1.Unix(1_700_000_000, 0)
	encoded := make([][]byte, n)

	for i := range encoded {
		node := fmt.Sprintf("worker-%05d", i)
		csr := &certificatesv1.CertificateSigningRequest{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("csr-%05d", i), GenerateName: "csr-", UID: types.UID(fmt.Sprintf("0b6d2c2e-6a52-4d3a-9c51-%012d", i)),
				ResourceVersion: fmt.Sprint(100_000 + i), CreationTimestamp: created,
			},
			Spec: certificatesv1.CertificateSigningRequestSpec{
				Request:    bytes.Repeat([]byte("r"), 650),
				SignerName: certificatesv1.KubeletServingSignerName,
				Usages:     []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageKeyEncipherment, certificatesv1.UsageServerAuth},
				Username:   "system:node:" + node,
				Groups:     []string{"system:nodes", "system:authenticated"},
			},
			Status: certificatesv1.CertificateSigningRequestStatus{
				Conditions: []certificatesv1.CertificateSigningRequestCondition{{
					Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue, Reason: k8ssink.CSRApprovedReason,
					Message:        "approved by talos-ccm: every name and address belongs to node " + node + " (machine and addresses verified)",
					LastUpdateTime: created, LastTransitionTime: created,
				}},
				Certificate: bytes.Repeat([]byte("c"), 900),
			},
		}

		data, err := csr.Marshal()
		require.NoError(tb, err)

		encoded[i] = data
	}

	cached := make([]any, n)

	perRequest := testheap.RetainedPer(n, func() {
		for i, data := range encoded {
			csr := &certificatesv1.CertificateSigningRequest{}
			require.NoError(tb, csr.Unmarshal(data))

			trimmed, err := k8ssink.TrimCSR(csr)
			require.NoError(tb, err)

			cached[i] = trimmed
		}
	})

	runtime.KeepAlive(cached)
	runtime.KeepAlive(encoded)

	return perRequest
}

// An approved request is cached as a stub: it kept its requester, groups, usages and condition (with its
// reason, message and times), 872 bytes per request; 528 now, of which 448 are the request's struct itself
// (the lister hands out the API type) and the rest its name, uid and resourceVersion.
func TestDecidedCSRRetainsLittle(t *testing.T) {
	testheap.AtMost(t, "bytes per request", decidedCSRsRetained(t, 5000), 560)
}

// BenchmarkDecidedCSRRetained reports the heap the informer's cache keeps per approved request.
func BenchmarkDecidedCSRRetained(b *testing.B) {
	testheap.Report(b, "B/request", func() float64 { return decidedCSRsRetained(b, 5000) })
}

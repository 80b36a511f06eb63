package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	certificatesv1 "k8s.io/api/certificates/v1"
)

func TestHostileDecision(t *testing.T) {
	t.Parallel()

	condition := func(kind certificatesv1.RequestConditionType) certificatesv1.CertificateSigningRequestCondition {
		return certificatesv1.CertificateSigningRequestCondition{Type: kind, Message: string(kind) + " by talos-ccm"}
	}

	for _, tc := range []struct {
		name       string
		conditions []certificatesv1.CertificateSigningRequestCondition
		denied     bool
		err        string
	}{
		{name: "undecided"},
		{name: "denied", conditions: []certificatesv1.CertificateSigningRequestCondition{condition(certificatesv1.CertificateDenied)}, denied: true},
		{name: "approved", conditions: []certificatesv1.CertificateSigningRequestCondition{condition(certificatesv1.CertificateApproved)}, err: "Approved, not denied"},
		{name: "failed", conditions: []certificatesv1.CertificateSigningRequestCondition{condition(certificatesv1.CertificateFailed)}, err: "Failed, not denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			csr := &certificatesv1.CertificateSigningRequest{}
			csr.Name = "csr-hostile-1"
			csr.Status.Conditions = tc.conditions

			denial, err := hostileDecision(csr)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.Nil(t, denial)

				return
			}

			require.NoError(t, err)
			assert.Equal(t, tc.denied, denial != nil)

			if tc.denied {
				assert.Equal(t, "Denied by talos-ccm", denial.Message)
			}
		})
	}
}

// The figure is talos-ccm's CPU over the phase divided by the number of requests, against one verification.
func TestReportHostile(t *testing.T) {
	t.Parallel()

	var out bytes.Buffer

	reportHostile(&out, &hostileResult{
		requests: 8,
		keyBits:  65537,
		cpu:      80 * time.Millisecond,
		verify:   500 * time.Millisecond,
		approval: 12 * time.Millisecond,
		before:   6 * time.Millisecond,
		filed:    2 * time.Second,
		denied:   3 * time.Second,
		others:   cpuShares{controlPlane: 8.04, harness: 0.31},
	})

	lines := bytes.Split(bytes.TrimSpace(out.Bytes()), []byte("\n"))
	require.Len(t, lines, 5)
	assert.Regexp(t, `^8 kubelets file a CSR with an RSA 65537-bit key +talos-ccm CPU per hostile request +10ms +500ms \(verifying one signature\) +0\.020x$`, string(lines[1]))
	assert.Regexp(t, `another node's CSR approval, filed right after them +12ms +6ms \(p50 before the flood\) +2\.00x$`, string(lines[2]))
	assert.Regexp(t, `all of them denied within \(the apiserver verifies each at its creation and denial\) +2s / 3s +- +-$`, string(lines[3]))
	assert.Regexp(t, `CPU of apiserver\+etcd / of the harness over the phase +8\.0 s / 0\.3 s +- +-$`, string(lines[4]))
}

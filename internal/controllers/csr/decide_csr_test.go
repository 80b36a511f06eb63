package csr_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// BenchmarkDecideCSR measures one decision of a request whose parse is kept, as the CSRDecision controller
// makes it: while its Node joins (every change of the Node, its transform and its machine decides a waiting
// request again), and once the Node is initialized.
func BenchmarkDecideCSR(b *testing.B) {
	for _, bc := range []struct {
		name    string
		modify  func(*csrctrl.DecisionInput)
		verdict string
	}{
		{name: "waiting for the Node", modify: func(in *csrctrl.DecisionInput) { in.Node.Uninitialized = true }, verdict: csr.VerdictWait},
		{name: "approved", modify: func(*csrctrl.DecisionInput) {}, verdict: csr.VerdictApprove},
	} {
		b.Run(bc.name, func(b *testing.B) {
			in := validInput(b)
			in.VerifiedAddresses = in.Node.GetAddresses()
			bc.modify(&in)
			in.Parsed = csrctrl.ParseRequest(in.CSR.GetRequest())

			decision, _ := csrctrl.DecideCSR(in)
			require.Equal(b, bc.verdict, decision.GetVerdict(), decision.GetReason())

			b.ReportAllocs()

			for b.Loop() {
				csrctrl.DecideCSR(in)
			}
		})
	}
}

// A decision's reason names the rules that did not pass, each as "rule N (name): reason", and only those.
func TestDecideCSRReason(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name   string
		modify func(*csrctrl.DecisionInput)
		want   string
	}{
		{
			name:   "approved",
			modify: func(*csrctrl.DecisionInput) {},
			want:   "every rule passes",
		},
		{
			name:   "approved with a rule skipped",
			modify: func(in *csrctrl.DecisionInput) { in.TalosFacts, in.Verified, in.Machine = false, false, nil },
			want:   "every rule passes; rule 8 (machine-addresses): no Talos API access: the out-of-band address check is off",
		},
		{
			name:   "waiting",
			modify: func(in *csrctrl.DecisionInput) { in.Node.Uninitialized = true },
			want: `rule 6 (node): Node "w1" is not initialized yet; ` +
				"rule 7 (node-addresses): the Node's addresses are not final until it is initialized",
		},
		{
			name: "denied, and waiting on another rule",
			modify: func(in *csrctrl.DecisionInput) {
				in.Node.Uninitialized = true
				in.CSR.ExpirationSeconds = -1
			},
			want: "rule 5 (expiration): expirationSeconds -1 is more than the maximum 31536000",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			in := validInput(t)
			in.VerifiedAddresses = in.Node.GetAddresses()
			tc.modify(&in)

			decision, _ := csrctrl.DecideCSR(in)
			require.Equal(t, tc.want, decision.GetReason())
		})
	}
}

package csr_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/controllers/ctest"
	"github.com/talos-ccm/talos-ccm/internal/metrics"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	noderes "github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// startDecider runs the CSRDecision controller with the options on an in-memory state that holds the
// active config of validInput; it checks for leaked goroutines once the test is over.
func startDecider(t *testing.T, opts csrctrl.CSRDecisionOptions) (*ctest.Suite, csrctrl.DecisionInput) {
	t.Helper()

	valid := validInput(t)

	s := ctest.New(t, ctest.WithTimeout(20*time.Second))
	s.Register(csrctrl.NewCSRDecisionController(opts))
	s.Start()

	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value = proto.CloneOf(valid.Config)
	s.Create(cfg)

	return s, valid
}

// fileRequest creates the mirror of the request id with a copy of spec, labelled with its requester as the
// Kubernetes source labels it; created, unless zero, is when the request was created.
func fileRequest(s *ctest.Suite, id string, spec *specs.KubeCSRSpec, created time.Time) {
	request := kube.NewKubeCSR(kube.NamespaceName, id)
	request.TypedSpec().Value = proto.CloneOf(spec)

	if !created.IsZero() {
		request.TypedSpec().Value.Created = timestamppb.New(created)
	}

	kube.LabelRequester(request)
	s.Create(request)
}

func TestCSRDecisionController(t *testing.T) {
	approvals := counterValue(t, metrics.CSRDecisions.WithLabelValues(csrres.VerdictApprove))
	ruleTenFailures := counterValue(t, metrics.CSRRuleFailures.WithLabelValues("10-operator"))

	s, valid := startDecider(t, csrctrl.CSRDecisionOptions{TalosFacts: true, Now: func() time.Time { return now }})

	cfg, err := safe.StateGetByID[*config.Config](s.Ctx(), s.State, config.ActiveID)
	require.NoError(t, err)

	// A request that comes before its Node waits.
	fileRequest(s, "csr-1", valid.CSR, time.Time{})

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictWait, d.TypedSpec().Value.GetVerdict())
		a.Contains(d.TypedSpec().Value.GetReason(), `Node "w1" does not exist yet`)
		a.Equal("w1", d.TypedSpec().Value.GetNode())
	})

	// The Node registers, uninitialized: still waiting.
	node := kube.NewKubeNode(kube.NamespaceName, "w1")
	node.TypedSpec().Value = proto.CloneOf(valid.Node)
	node.TypedSpec().Value.Uninitialized = true
	s.Create(node)

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Contains(d.TypedSpec().Value.GetReason(), "not initialized yet")
	})

	// Initialized, but the Talos facts are not read yet.
	node.TypedSpec().Value.Uninitialized = false
	s.Update(node)

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictWait, d.TypedSpec().Value.GetVerdict())
		a.Contains(d.TypedSpec().Value.GetReason(), "Talos facts")
	})

	// The facts come: approved.
	machine := talos.NewMachineAddresses(talos.NamespaceName, "w1")
	machine.TypedSpec().Value = proto.CloneOf(valid.Machine)
	s.Create(machine)

	// The facts are read, but talos-ccm has not bound the Node to its machine yet: what the kubelet wrote
	// into the Node's status grants nothing.
	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictWait, d.TypedSpec().Value.GetVerdict())
		a.Contains(d.TypedSpec().Value.GetReason(), "verified facts")
	})

	// The Node's transform is verified: approved, against the addresses it holds.
	transform := noderes.NewNodeTransform(noderes.NamespaceName, "w1")
	transform.TypedSpec().Value = &specs.NodeTransformSpec{Verified: true, Initialize: true, Addresses: valid.Node.GetAddresses()}
	s.Create(transform)

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictApprove, d.TypedSpec().Value.GetVerdict(), d.TypedSpec().Value.GetReason())

		// The decision names the version of the request mirror it was computed from (the sink checks it).
		current, err := safe.StateGetByID[*kube.KubeCSR](s.Ctx(), s.State, "csr-1")
		a.NoError(err)
		a.Equal(csrres.InputVersion(current), d.TypedSpec().Value.GetInputVersion())
	})

	// A newer request of the same node supersedes it once its inputs change; the newer one is decided.
	fileRequest(s, "csr-2", valid.CSR, now)

	ctest.AssertResource(s, "csr-2", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictApprove, d.TypedSpec().Value.GetVerdict())
	})

	machine.TypedSpec().Value.Addresses = append(machine.TypedSpec().Value.Addresses, &specs.MachineAddress{Address: "10.0.0.99/32"})
	s.Update(machine)

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictDeny, d.TypedSpec().Value.GetVerdict())
		a.Equal("csr-2", d.TypedSpec().Value.GetSupersededBy())
	})

	// A configuration change re-decides: an operator narrowing that excludes the ExternalIP denies.
	cfg.TypedSpec().Value.CsrApproval = &specs.CSRApprovalConfig{AllowedIpPrefixes: []string{"10.0.0.0/8"}}
	s.Update(cfg)

	ctest.AssertResource(s, "csr-2", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictDeny, d.TypedSpec().Value.GetVerdict())
		a.Contains(d.TypedSpec().Value.GetReason(), "rule 10")
	})

	// Verdicts are counted, denials by failed rule.
	assert.GreaterOrEqual(t, counterValue(t, metrics.CSRDecisions.WithLabelValues(csrres.VerdictApprove))-approvals, 2.0)
	assert.GreaterOrEqual(t, counterValue(t, metrics.CSRRuleFailures.WithLabelValues("10-operator"))-ruleTenFailures, 1.0)

	// Decisions are not rewritten when nothing changed, so they keep the time they were reached.
	before, err := safe.StateGetByID[*csrres.CSRDecision](s.Ctx(), s.State, "csr-2")
	require.NoError(t, err)

	node.TypedSpec().Value.Ready = true
	s.Update(node)

	ctest.AssertResource(s, "csr-2", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(before.Metadata().Version(), d.Metadata().Version())
	})

	// Requests leave: so do their decisions.
	ctest.Destroy[*kube.KubeCSR](s, "csr-2")
	ctest.AssertNoResource[*csrres.CSRDecision](s, "csr-2")

	// Superseded is final: with the newer request gone, the older one is still not decided.
	cfg.TypedSpec().Value.CsrApproval = nil
	s.Update(cfg)

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictDeny, d.TypedSpec().Value.GetVerdict())
		a.Equal("csr-2", d.TypedSpec().Value.GetSupersededBy())
	})

	ctest.Destroy[*kube.KubeCSR](s, "csr-1")
	ctest.AssertNoResource[*csrres.CSRDecision](s, "csr-1")
}

// A newer request that was decided and then left (approved, so no longer mirrored) before an older sibling
// was decided again still supersedes that sibling: the older one must not be approved as well.
func TestCSRDecisionControllerRemembersNewerRequests(t *testing.T) {
	// In a bubble: synctest.Wait tells when the controller is done with what it was given.
	synctest.Test(t, func(t *testing.T) {
		s, valid := startDecider(t, csrctrl.CSRDecisionOptions{Now: func() time.Time { return now }})

		node := kube.NewKubeNode(kube.NamespaceName, "w1")
		node.TypedSpec().Value = proto.CloneOf(valid.Node)
		node.TypedSpec().Value.Uninitialized = true
		s.Create(node)

		// The older request is decided alone: it waits for the Node.
		fileRequest(s, "csr-older", valid.CSR, time.Time{})

		ctest.AssertResource(s, "csr-older", func(d *csrres.CSRDecision, a *assert.Assertions) {
			a.Contains(d.TypedSpec().Value.GetReason(), "not initialized yet")
			a.Empty(d.TypedSpec().Value.GetSupersededBy())
		})

		// The controller puts its finalizer on the request, which reconciles it once more: let that pass (the
		// controller is idle once every goroutine of the bubble is blocked), so that nothing but the Node
		// change below decides the older request again.
		ctest.AssertResource(s, "csr-older", func(r *kube.KubeCSR, a *assert.Assertions) {
			a.False(r.Metadata().Finalizers().Empty())
		})
		synctest.Wait()

		// A newer one comes, is decided, and leaves before anything re-decides the older one.
		fileRequest(s, "csr-newer", valid.CSR, now)

		ctest.AssertResource(s, "csr-newer", func(d *csrres.CSRDecision, a *assert.Assertions) {
			a.Contains(d.TypedSpec().Value.GetReason(), "not initialized yet")
		})

		ctest.Destroy[*kube.KubeCSR](s, "csr-newer")
		ctest.AssertNoResource[*csrres.CSRDecision](s, "csr-newer")

		// The Node is initialized: the older request is decided again, and stays superseded.
		node.TypedSpec().Value.Uninitialized = false
		s.Update(node)

		ctest.AssertResource(s, "csr-older", func(d *csrres.CSRDecision, a *assert.Assertions) {
			a.Equal(csrres.VerdictDeny, d.TypedSpec().Value.GetVerdict(), d.TypedSpec().Value.GetReason())
			a.Equal("csr-newer", d.TypedSpec().Value.GetSupersededBy())
		})

		// A request that comes after the newer one left was never pending beside it: it is decided, even when
		// it was created in the same second and sorts before it.
		fileRequest(s, "csr-a-later", valid.CSR, now)

		ctest.AssertResource(s, "csr-a-later", func(d *csrres.CSRDecision, a *assert.Assertions) {
			a.Equal(csrres.VerdictApprove, d.TypedSpec().Value.GetVerdict(), d.TypedSpec().Value.GetReason())
			a.Empty(d.TypedSpec().Value.GetSupersededBy())
		})
	})
}

func TestCSRDecisionControllerWithoutTalos(t *testing.T) {
	s, valid := startDecider(t, csrctrl.CSRDecisionOptions{})

	node := kube.NewKubeNode(kube.NamespaceName, "w1")
	node.TypedSpec().Value = proto.CloneOf(valid.Node)
	s.Create(node)

	fileRequest(s, "csr-1", valid.CSR, time.Time{})

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		spec := d.TypedSpec().Value
		a.Equal(csrres.VerdictApprove, spec.GetVerdict(), spec.GetReason())
		a.Contains(spec.GetReason(), "rule 8 (machine-addresses): no Talos API access")
		a.WithinDuration(time.Now(), spec.GetDecidedAt().AsTime(), time.Minute)
	})
}

// A request filed before talos-ccm has an active config is decided once the config comes: the config maps
// to the requests the controller has seen, which must include those it skipped for want of a config.
func TestCSRDecisionControllerDecidesOnceConfigComes(t *testing.T) {
	valid := validInput(t)

	s := ctest.New(t, ctest.WithTimeout(20*time.Second))
	s.Register(csrctrl.NewCSRDecisionController(csrctrl.CSRDecisionOptions{}))
	s.Start()

	node := kube.NewKubeNode(kube.NamespaceName, "w1")
	node.TypedSpec().Value = proto.CloneOf(valid.Node)
	s.Create(node)

	fileRequest(s, "csr-1", valid.CSR, time.Time{})

	// The controller sees the request and skips it: it holds its finalizer, and no decision is written.
	ctest.AssertResource(s, "csr-1", func(in *kube.KubeCSR, a *assert.Assertions) {
		a.True(in.Metadata().Finalizers().Has("csr.CSRDecisionController"))
	})
	ctest.AssertNoResource[*csrres.CSRDecision](s, "csr-1")

	cfg := config.NewConfig(config.NamespaceName, config.ActiveID)
	cfg.TypedSpec().Value = proto.CloneOf(valid.Config)
	s.Create(cfg)

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictApprove, d.TypedSpec().Value.GetVerdict(), d.TypedSpec().Value.GetReason())
	})
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()

	var m dto.Metric

	require.NoError(t, c.Write(&m))

	return m.GetCounter().GetValue()
}

// A requester that files more requests than the configured rate has its next one wait, unread, with the
// reason; another requester is decided as usual.
func TestCSRDecisionControllerThrottles(t *testing.T) {
	s, valid := startDecider(t, csrctrl.CSRDecisionOptions{Now: func() time.Time { return now }})

	cfg, err := safe.StateGetByID[*config.Config](s.Ctx(), s.State, config.ActiveID)
	require.NoError(t, err)

	cfg.TypedSpec().Value.CsrApproval = &specs.CSRApprovalConfig{RequestsPerMinute: 1}
	s.Update(cfg)

	for _, name := range []string{"w1", "w2"} {
		node := kube.NewKubeNode(kube.NamespaceName, name)
		node.TypedSpec().Value = proto.CloneOf(valid.Node)
		s.Create(node)
	}

	create := func(id, node string, created time.Time) {
		spec := proto.CloneOf(valid.CSR)
		spec.Username = csrctrl.NodeUserPrefix + node
		fileRequest(s, id, spec, created)
	}

	create("csr-1", "w1", now.Add(-time.Minute))

	ctest.AssertResource(s, "csr-1", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.NotContains(d.TypedSpec().Value.GetReason(), "throttled")
		a.NotEmpty(d.TypedSpec().Value.GetRules(), "decided in full")
	})

	create("csr-2", "w1", now)

	ctest.AssertResource(s, "csr-2", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictWait, d.TypedSpec().Value.GetVerdict())
		a.Contains(d.TypedSpec().Value.GetReason(), "throttled: the requester files more than 1 requests a minute")
		a.Empty(d.TypedSpec().Value.GetRules(), "not read")
	})

	create("csr-3", "w2", now)

	ctest.AssertResource(s, "csr-3", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.NotContains(d.TypedSpec().Value.GetReason(), "throttled")
		a.NotEmpty(d.TypedSpec().Value.GetRules(), "decided in full")
	})
}

// A kubelet whose request was approved asks again at once when its Node gained names or IPs, often within the
// same second: the new request follows the approved one, whatever their names, and is decided in full instead
// of being denied as superseded by the request it follows.
func TestCSRDecisionControllerNextRequestOfTheSameSecond(t *testing.T) {
	s, valid := startDecider(t, csrctrl.CSRDecisionOptions{TalosFacts: true, Now: func() time.Time { return now }})

	node := kube.NewKubeNode(kube.NamespaceName, "w1")
	node.TypedSpec().Value = proto.CloneOf(valid.Node)
	s.Create(node)

	machine := talos.NewMachineAddresses(talos.NamespaceName, "w1")
	machine.TypedSpec().Value = proto.CloneOf(valid.Machine)
	s.Create(machine)

	transform := noderes.NewNodeTransform(noderes.NamespaceName, "w1")
	transform.TypedSpec().Value = &specs.NodeTransformSpec{Verified: true, Initialize: true, Addresses: valid.Node.GetAddresses()}
	s.Create(transform)

	fileRequest(s, "csr-zzz", valid.CSR, now)

	ctest.AssertResource(s, "csr-zzz", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictApprove, d.TypedSpec().Value.GetVerdict(), d.TypedSpec().Value.GetReason())
	})

	// The next request, of the same second, with a name that sorts before: approved.
	fileRequest(s, "csr-aaa", valid.CSR, now)

	ctest.AssertResource(s, "csr-aaa", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictApprove, d.TypedSpec().Value.GetVerdict(), d.TypedSpec().Value.GetReason())
		a.Empty(d.TypedSpec().Value.GetSupersededBy())
	})

	// The one it follows, while it has not left, is superseded by it once decided again.
	machine.TypedSpec().Value.Addresses = append(machine.TypedSpec().Value.Addresses, &specs.MachineAddress{Address: "10.0.0.99/32"})
	s.Update(machine)

	ctest.AssertResource(s, "csr-zzz", func(d *csrres.CSRDecision, a *assert.Assertions) {
		a.Equal(csrres.VerdictDeny, d.TypedSpec().Value.GetVerdict())
		a.Equal("csr-aaa", d.TypedSpec().Value.GetSupersededBy())
	})
}

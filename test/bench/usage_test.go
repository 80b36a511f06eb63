package main

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestCountRequests(t *testing.T) {
	t.Parallel()

	series := map[string]float64{
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="apply"}`:                                100,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="update"}`:                               100,
		`talos_ccm_kubernetes_requests_total{code="409",resource="nodes",verb="update"}`:                               3,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes/status",verb="patch"}`:                         100,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="get"}`:                                  3,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="list"}`:                                 1,
		`talos_ccm_kubernetes_requests_total{code="200",resource="certificatesigningrequests",verb="watch"}`:           2,
		`talos_ccm_kubernetes_requests_total{code="200",resource="certificatesigningrequests/approval",verb="update"}`: 100,
		`talos_ccm_kubernetes_requests_total{code="201",resource="events",verb="create"}`:                              90,
		`talos_ccm_kubernetes_requests_total{code="200",resource="events",verb="patch"}`:                               10,
		`talos_ccm_kubernetes_requests_total{code="200",resource="leases",verb="update"}`:                              30,
		`talos_ccm_kubernetes_requests_total{code="200",resource="leases",verb="get"}`:                                 30,
		`talos_ccm_kubernetes_requests_total{code="200",resource="services/status",verb="patch"}`:                      4,
		`talos_ccm_talos_api_calls_total{call="get",resource="PlatformMetadatas.talos.dev",result="ok"}`:               100,
		`talos_ccm_kubernetes_request_duration_seconds_count{resource="nodes",verb="apply"}`:                           100,
		`talos_ccm_kubernetes_request_duration_seconds_bucket{le="0.005",resource="nodes",verb="update"}`:              100,
		`talos_ccm_kubernetes_requests_total{code="error",resource="nodes/status",verb="patch"}`:                       1,
		`talos_ccm_kubernetes_requests_total{code="200",resource="certificatesigningrequests/approval",verb="get"}`:    1,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes/proxy",verb="create"}`:                         1,
		`talos_ccm_kubernetes_requests_total{code="200",resource="certificatesigningrequests",verb="delete"}`:          1,
		`talos_ccm_kubernetes_requests_total{code="200",resource="other",verb="get"}`:                                  1,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="delete"}`:                               1,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="patch"}`:                                0,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodestatus",verb="patch"}`:                           1,
		`talos_ccm_kubernetes_requests_total{code="200",resource="configmaps",verb="update"}`:                          1,
	}

	got := countRequests(series)

	assert.Equal(t, map[string]float64{
		"apply": 100, "update": 103, "patch status": 101, "create proxy": 1, "delete": 1, "patch": 0,
	}, got.nodeWrites)
	assert.Equal(t, map[string]float64{"get": 5, "list": 1, "watch": 2}, got.reads)
	assert.InDelta(t, 4, got.nodeWritesFailed, 0)
	assert.InDelta(t, 100, got.csrApprovals, 0)
	assert.InDelta(t, 100, got.events, 0)
	// services/status, the request deletion, nodestatus (no Node) and configmaps; not the lease.
	assert.InDelta(t, 7, got.otherWrites, 0)
	assert.InDelta(t, 306+100+100+7, got.writes(), 0)

	perNode := got.per(100)
	assert.InDelta(t, 1.03, perNode.nodeWrites["update"], 1e-9)
	assert.InDelta(t, 0.04, perNode.nodeWritesFailed, 1e-9)
}

func TestRequestCountsMinus(t *testing.T) {
	t.Parallel()

	before := countRequests(map[string]float64{
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="apply"}`:                                100,
		`talos_ccm_kubernetes_requests_total{code="200",resource="certificatesigningrequests/approval",verb="update"}`: 100,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="get"}`:                                  7,
	})
	after := countRequests(map[string]float64{
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="apply"}`:                                100,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="update"}`:                               2,
		`talos_ccm_kubernetes_requests_total{code="200",resource="certificatesigningrequests/approval",verb="update"}`: 101,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="get"}`:                                  7,
	})

	idle := after.minus(before)

	assert.Equal(t, map[string]float64{"update": 2}, idle.nodeWrites, "unchanged verbs are left out")
	assert.Empty(t, idle.reads)
	assert.InDelta(t, 1, idle.csrApprovals, 0)
	assert.InDelta(t, 3, idle.writes(), 0)
}

func TestTalosCalls(t *testing.T) {
	t.Parallel()

	series := map[string]float64{
		`talos_ccm_talos_api_calls_total{call="get",resource="PlatformMetadatas.talos.dev",result="ok"}`:                   100,
		`talos_ccm_talos_api_calls_total{call="get",resource="Nodenames.kubernetes.talos.dev",result="ok"}`:                100,
		`talos_ccm_talos_api_calls_total{call="watch",resource="AddressStatuses.net.talos.dev",result="ok"}`:               100,
		`talos_ccm_talos_api_calls_total{call="watch",resource="PlatformMetadatas.talos.dev",result="ok"}`:                 97,
		`talos_ccm_talos_api_calls_total{call="watch",resource="PlatformMetadatas.talos.dev",result="error"}`:              3,
		`talos_ccm_talos_api_calls_total{call="get",resource="PlatformMetadatas.talos.dev",result="not_found"}`:            1,
		`talos_ccm_talos_api_calls_total{call="watch",resource="AddressStatuses.net.talos.dev",result="error"}`:            2,
		`talos_ccm_kubernetes_requests_total{code="200",resource="nodes",verb="watch"}`:                                    5,
		`talos_ccm_talos_api_calls_total{call="get",resource="ControllerManagerConfigs.kubernetes.talos.dev",result="ok"}`: 3,
	}

	assert.Equal(t, map[string]float64{"get": 204, "watch": 202}, talosCalls(series, "call"))
	assert.Equal(t, "4.0 (ControllerManagerConfigs 1.0, PlatformMetadatas 3.0)",
		talosIdleText(map[string]float64{"PlatformMetadatas.talos.dev": 2, "PlatformMetadatas.other.dev": 1, "ControllerManagerConfigs.kubernetes.talos.dev": 1}))
	assert.Equal(t, "0.0", talosIdleText(map[string]float64{}))
}

func TestSubtract(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name string
		a, b map[string]float64
		want map[string]float64
	}{
		{name: "both empty", want: map[string]float64{}},
		{name: "equal", a: map[string]float64{"x": 1}, b: map[string]float64{"x": 1}, want: map[string]float64{}},
		{name: "grown", a: map[string]float64{"x": 3, "y": 1}, b: map[string]float64{"x": 1}, want: map[string]float64{"x": 2, "y": 1}},
		{name: "gone", a: map[string]float64{}, b: map[string]float64{"x": 1}, want: map[string]float64{"x": -1}},
	} {
		assert.Equal(t, tc.want, subtract(tc.a, tc.b), tc.name)
	}
}

func TestPeakResident(t *testing.T) {
	t.Parallel()

	now := readResidentSplit(os.Getpid())
	assert.NotZero(t, now.anon, "this process has a heap")
	assert.NotZero(t, now.file, "this process runs from its binary")
	assert.Zero(t, readResidentSplit(-1), "a process that is not there has no memory")

	ctx, cancel := context.WithCancel(t.Context())
	peaks := peakResident(ctx, os.Getpid(), time.Millisecond)

	time.Sleep(20 * time.Millisecond)
	cancel()

	peak := <-peaks
	assert.GreaterOrEqual(t, peak.anon, now.anon/2)
	assert.NotZero(t, peak.file)
}

func TestStateWrites(t *testing.T) {
	t.Parallel()

	series := map[string]float64{
		`talos_ccm_state_writes_total{result="ok",type="CSRDecisions.csr.tccm.dev"}`:         40,
		`talos_ccm_state_writes_total{result="error",type="CSRDecisions.csr.tccm.dev"}`:      2,
		`talos_ccm_state_writes_total{result="ok",type="NodeTransforms.node.tccm.dev"}`:      50,
		`talos_ccm_state_pending_writes`:                                                     7,
		`talos_ccm_talos_api_calls_total{call="get",resource="Nodenames.talos.dev"}`:         3,
		`talos_ccm_state_writes_total{result="ok",type="NodeLifecycles.lifecycle.tccm.dev"}`: 25,
	}

	writes := perKey(stateWrites(series), 25)
	assert.Equal(t, map[string]float64{"CSRDecisions": 1.68, "NodeTransforms": 2, "NodeLifecycles": 1}, writes)
	assert.Equal(t, "CSRDecisions 1.68, NodeLifecycles 1.00, NodeTransforms 2.00", countsText(writes, "%.2f"))
}

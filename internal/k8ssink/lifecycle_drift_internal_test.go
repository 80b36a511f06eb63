package k8ssink

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
)

func TestLifecycleWantsPass(t *testing.T) {
	t.Parallel()

	running := &specs.NodeLifecycleSpec{Reason: "the Node is Ready"}
	shutdown := &specs.NodeLifecycleSpec{Shutdown: true}
	stale := &specs.NodeLifecycleSpec{Delete: true}

	plain := &specs.KubeNodeSpec{Taints: []*specs.Taint{{Key: "node.kubernetes.io/not-ready", Effect: "NoSchedule"}}}
	tainted := &specs.KubeNodeSpec{Taints: []*specs.Taint{{Key: kubekeys.TaintShutdown, Effect: "NoSchedule"}}}

	clean := &specs.ApplyStatusSpec{AppliedVersion: "3"}

	for _, tc := range []struct {
		name    string
		verdict *specs.NodeLifecycleSpec
		mirror  *specs.KubeNodeSpec
		last    *specs.ApplyStatusSpec
		want    bool
	}{
		{name: "running, no taint", verdict: running, mirror: plain, last: clean, want: false},
		{name: "shut down, tainted", verdict: shutdown, mirror: tainted, last: clean, want: false},
		{name: "running, tainted by someone", verdict: running, mirror: tainted, last: clean, want: true},
		{name: "shut down, taint removed by someone", verdict: shutdown, mirror: plain, last: clean, want: true},
		{name: "to delete", verdict: stale, mirror: plain, last: clean, want: true},
		// A pass that has nothing to say leaves no ApplyStatus; the verdict's creation runs the first pass.
		{name: "no ApplyStatus, no taint", verdict: running, mirror: plain, want: false},
		{name: "no ApplyStatus, tainted by someone", verdict: running, mirror: tainted, want: true},
		{name: "no ApplyStatus, to delete", verdict: stale, mirror: plain, want: true},
		{name: "the Node was not in the cache", verdict: running, mirror: plain, last: &specs.ApplyStatusSpec{Error: "Node not found"}, want: true},
		{name: "the last write failed", verdict: running, mirror: plain, last: &specs.ApplyStatusSpec{ConsecutiveFailures: 2}, want: true},
		{name: "no mirror spec", verdict: running, last: clean, want: false},
		{name: "no verdict spec, tainted", mirror: tainted, last: clean, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.want, lifecycleWantsPass(tc.verdict, tc.mirror, tc.last))
		})
	}
}

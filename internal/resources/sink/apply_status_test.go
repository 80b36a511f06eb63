package sink_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

func TestApplyStatusID(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		kind sink.Kind
		name string
		id   string
	}{
		{kind: sink.KindNode, name: "worker-1", id: "node/worker-1"},
		{kind: sink.KindPodCIDR, name: "worker-1", id: "podcidr/worker-1"},
		{kind: sink.KindCSR, name: "csr-abcde", id: "csr/csr-abcde"},
		{kind: sink.KindLifecycle, name: "worker-1", id: "lifecycle/worker-1"},
		{kind: sink.KindService, name: "default/web", id: "service/default/web"},
	} {
		t.Run(tc.id, func(t *testing.T) {
			t.Parallel()

			assert.Equal(t, tc.id, sink.ApplyStatusID(tc.kind, tc.name))

			kind, name, ok := sink.ParseApplyStatusID(tc.id)
			assert.True(t, ok)
			assert.Equal(t, tc.kind, kind)
			assert.Equal(t, tc.name, name)
		})
	}
}

func TestParseApplyStatusIDRejects(t *testing.T) {
	t.Parallel()

	for _, id := range []string{"", "node", "node/", "/worker-1"} {
		_, _, ok := sink.ParseApplyStatusID(id)
		assert.False(t, ok, id)
	}
}

// The copies of ApplyStatuses of the same writes hold one list of them, not any ApplyStatus's own.
func TestApplyStatusCopiesShareWrites(t *testing.T) {
	t.Parallel()

	status := func(name string) *sink.ApplyStatus {
		res := sink.NewApplyStatus(sink.NamespaceName, sink.ApplyStatusID(sink.KindNode, name))
		res.TypedSpec().Value = &specs.ApplyStatusSpec{Object: "Node/" + name, Writes: []string{"labels and annotations", "status.addresses"}}

		return res
	}

	a, b := status("worker-1"), status("worker-2")

	ca, ok := a.DeepCopy().(*sink.ApplyStatus)
	require.True(t, ok)

	cb, ok := b.DeepCopy().(*sink.ApplyStatus)
	require.True(t, ok)

	require.True(t, resource.Equal(a, ca))
	assert.Same(t, &ca.TypedSpec().Value.GetWrites()[0], &cb.TypedSpec().Value.GetWrites()[0], "one list")
	assert.NotSame(t, &a.TypedSpec().Value.GetWrites()[0], &ca.TypedSpec().Value.GetWrites()[0], "not the writer's")
}

package sink_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

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

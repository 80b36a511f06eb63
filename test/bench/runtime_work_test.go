package main

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseRuntimeWork(t *testing.T) {
	t.Parallel()

	doc := `{
"cmdline": ["talos-ccm"],
"controller_reads": {"node.NodeTransformController": 44, "k8ssink.NodeSinkController": 17},
"controller_writes": {"node.NodeTransformController": 2, "kube.KubeNodeController": 3},
"qcontroller_processed": {"node.NodeTransformController": 5, "k8ssink.NodeSinkController": 4},
"qcontroller_queue_length": {"node.NodeTransformController": 0}
}`

	w, err := parseRuntimeWork(strings.NewReader(doc))
	require.NoError(t, err)
	assert.Equal(t, runtimeWork{reconciles: 9, reads: 61, writes: 5}, w)
	assert.Equal(t, "9.0 / 61.0 / 5.0", w.String())

	_, err = parseRuntimeWork(strings.NewReader("not json"))
	require.Error(t, err)
}

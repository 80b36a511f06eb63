package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequestTally(t *testing.T) {
	t.Parallel()

	const before = `# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PUT",version="v1"} 10
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PUT",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 4
apiserver_request_latencies_summary{verb="PUT"} 99
`

	const after = `apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PUT",version="v1"} 16
apiserver_request_total{code="409",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="",verb="PUT",version="v1"} 1
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="nodes",scope="resource",subresource="status",verb="PATCH",version="v1"} 4
apiserver_request_total{code="0",component="apiserver",dry_run="",group="",resource="",scope="",subresource="/openapi/v3",verb="GET",version=""} 1e+00
`

	first, second := requestTally{}, requestTally{}
	require.NoError(t, first.add(before))
	require.NoError(t, second.add(after))

	assert.Equal(t, requestTally{"PUT nodes": 11, "PATCH nodes/status": 4}, first)

	grown := second.since(first, 2)
	assert.Equal(t, requestTally{"PUT nodes": 3, "GET /openapi/v3": 0.5}, grown)
	assert.Equal(t, "3.0 PUT nodes, 0.5 GET /openapi/v3", grown.String())
	assert.Equal(t, "none", requestTally{}.String())

	assert.Error(t, requestTally{}.add(`apiserver_request_total{verb="PUT"} many`))
}

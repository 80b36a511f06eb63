package ccmctl_test

import (
	"bytes"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
)

func TestJSONPathWriter(t *testing.T) {
	t.Parallel()

	a := nodeTransform("aws-1", &specs.NodeTransformSpec{
		ProviderId: "aws:///eu-west-1a/i-1",
		Labels:     map[string]string{"topology.kubernetes.io/zone": "eu-west-1a"},
		Initialize: true,
	})
	b := nodeTransform("gcp-2", &specs.NodeTransformSpec{Platform: "gcp"})
	b.Metadata().SetVersion(b.Metadata().Version().Next())

	asRes, err := meta.NewResourceDefinition(sink.ApplyStatusExtension{}.ResourceDefinition())
	require.NoError(t, err)

	for _, tc := range []struct {
		name     string
		template string
		list     bool
		event    string
		rows     []resource.Resource
		want     string
		wantErr  string
	}{
		{
			name:     "one resource",
			template: `{.metadata.id} {.metadata.version} {.spec.providerID} {.spec.initialize}`,
			rows:     []resource.Resource{a},
			want:     "aws-1 1 aws:///eu-west-1a/i-1 true",
		},
		{
			name:     "a map key with dots",
			template: `{.spec.labels.topology\.kubernetes\.io/zone}`,
			rows:     []resource.Resource{a},
			want:     "eu-west-1a",
		},
		{
			name:     "a list, as kubectl's",
			template: `{.kind}: {.items[*].metadata.id}`,
			list:     true,
			rows:     []resource.Resource{a, b},
			want:     "List: aws-1 gcp-2",
		},
		{
			name:     "range over a list, version as an integer",
			template: `{range .items[*]}{.metadata.id}={.metadata.version}{"\n"}{end}`,
			list:     true,
			rows:     []resource.Resource{a, b},
			want:     "aws-1=1\ngcp-2=2\n",
		},
		{
			name:     "a filter",
			template: `{.items[?(@.spec.platform=="gcp")].metadata.id}`,
			list:     true,
			rows:     []resource.Resource{a, b},
			want:     "gcp-2",
		},
		{
			name:     "an empty list",
			template: `{.items[*].metadata.id}`,
			list:     true,
			want:     "",
		},
		{
			name:     "each resource on its own, with the event, in watch mode",
			template: `{.event} {.metadata.id}{"\n"}`,
			event:    "updated",
			rows:     []resource.Resource{a, b},
			want:     "updated aws-1\nupdated gcp-2\n",
		},
		{
			name:     "missing keys print nothing",
			template: `[{.spec.noSuchField}]`,
			rows:     []resource.Resource{b},
			want:     "[]",
		},
		{
			name:     "a resource definition's aliases, each once",
			template: `{.spec.aliases}`,
			rows:     []resource.Resource{asRes},
			want:     `["as","applystatus"]`,
		},
		{name: "a bad template", template: `{.items[`, wantErr: `failed to parse jsonpath template "{.items["`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			var buf bytes.Buffer

			w, err := ccmctl.NewJSONPathWriter(&buf, tc.template, tc.list)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)

				return
			}

			require.NoError(t, err)

			for _, r := range tc.rows {
				require.NoError(t, w.Write(tc.event, r))
			}

			require.NoError(t, w.Flush())
			assert.Equal(t, tc.want, buf.String())
		})
	}
}

func TestJSONPathWriterExecutionError(t *testing.T) {
	t.Parallel()

	w, err := ccmctl.NewJSONPathWriter(&bytes.Buffer{}, `{.metadata.id[0]}`, false)
	require.NoError(t, err)

	require.ErrorContains(t, w.Write("", node.NewNodeTransform(node.NamespaceName, "a")), "failed to execute jsonpath template")
}

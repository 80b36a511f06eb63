package ccmctl_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/resources/sink"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

func nodeTransform(id string, spec *specs.NodeTransformSpec) *node.NodeTransform {
	nt := node.NewNodeTransform(node.NamespaceName, id)
	nt.TypedSpec().Value = spec
	nt.Metadata().SetVersion(nt.Metadata().Version().Next())

	return nt
}

func definition(t *testing.T, p meta.ResourceDefinitionProvider) *meta.ResourceDefinitionSpec {
	t.Helper()

	rd, err := meta.NewResourceDefinition(p.ResourceDefinition())
	require.NoError(t, err)

	return rd.TypedSpec()
}

func TestTable(t *testing.T) {
	t.Parallel()

	ready := nodeTransform("aws-1", &specs.NodeTransformSpec{
		ProviderId: "aws:///eu-west-1a/i-1",
		Platform:   "aws",
		Initialize: true,
	})
	waiting := nodeTransform("gcp-2", &specs.NodeTransformSpec{
		Platform: "gcp",
		Pending:  "waiting for the providerID\nfrom Talos",
	})

	addresses := talos.NewMachineAddresses(talos.NamespaceName, "metal-3")
	addresses.TypedSpec().Value = &specs.MachineAddressesSpec{
		NodeIp: "10.0.0.3",
		Addresses: []*specs.MachineAddress{
			{Address: "10.0.0.3/24", LinkName: "eth0"},
			{Address: "2001:db8::3/64", LinkName: "eth0"},
		},
	}

	facts := talos.NewPlatformMetadata(talos.NamespaceName, "metal-3")
	facts.TypedSpec().Value = &specs.PlatformMetadataSpec{Platform: "metal", MachineType: "controlplane"}

	rds := definition(t, &meta.ResourceDefinition{})
	rdRes, err := meta.NewResourceDefinition(node.NodeTransformExtension{}.ResourceDefinition())
	require.NoError(t, err)

	// ApplyStatuses declares "as" and "applystatus", which COSI adds again.
	asRes, err := meta.NewResourceDefinition(sink.ApplyStatusExtension{}.ResourceDefinition())
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		rd    *meta.ResourceDefinitionSpec
		watch bool
		rows  []resource.Resource
		event string
		want  string
	}{
		{
			name: "print columns, false and empty values shown",
			rd:   definition(t, node.NodeTransformExtension{}),
			rows: []resource.Resource{ready, waiting},
			want: `
NAMESPACE   TYPE            ID      VERSION   PROVIDER ID             PLATFORM   INITIALIZE   PENDING
node        NodeTransform   aws-1   1         aws:///eu-west-1a/i-1   aws        true         -
node        NodeTransform   gcp-2   1         -                       gcp        false        waiting for the providerID from Talos
`,
		},
		{
			name:  "watch has an event column",
			rd:    definition(t, node.NodeTransformExtension{}),
			rows:  []resource.Resource{ready},
			watch: true,
			event: "updated",
			want: `
EVENT       NAMESPACE   TYPE            ID      VERSION   PROVIDER ID             PLATFORM   INITIALIZE   PENDING
updated     node        NodeTransform   aws-1   1         aws:///eu-west-1a/i-1   aws        true         -
`,
		},
		{
			name: "list columns",
			rd:   definition(t, talos.MachineAddressesExtension{}),
			rows: []resource.Resource{addresses},
			want: `
NAMESPACE   TYPE             ID        VERSION     NODE IP    ADDRESSES
talos       MachineAddress   metal-3   undefined   10.0.0.3   10.0.0.3/24 2001:db8::3/64
`,
		},
		{
			name: "the machine type among a machine's facts",
			rd:   definition(t, talos.PlatformMetadataExtension{}),
			rows: []resource.Resource{facts},
			want: `
NAMESPACE   TYPE               ID        VERSION     PLATFORM   REGION   ZONE   INSTANCE TYPE   MACHINE TYPE
talos       PlatformMetadata   metal-3   undefined   metal      -        -      -               controlplane
`,
		},
		{
			name: "resource definitions (a spec that is not protobuf), each alias once",
			rd:   rds,
			rows: []resource.Resource{asRes, rdRes},
			want: `
NAMESPACE   TYPE                 ID                             VERSION     ALIASES
meta        ResourceDefinition   applystatuses.sink.tccm.dev    undefined   as applystatus
meta        ResourceDefinition   nodetransforms.node.tccm.dev   undefined   nt nodetransform nts
`,
		},
		{
			name: "widths counted in characters",
			rd:   definition(t, node.NodeTransformExtension{}),
			rows: []resource.Resource{
				nodeTransform("zürich-1", &specs.NodeTransformSpec{Platform: "métal"}),
				nodeTransform("paris-10", &specs.NodeTransformSpec{Platform: "metal"}),
			},
			want: `
NAMESPACE   TYPE            ID         VERSION   PROVIDER ID   PLATFORM   INITIALIZE   PENDING
node        NodeTransform   zürich-1   1         -             métal      false        -
node        NodeTransform   paris-10   1         -             metal      false        -
`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			var buf bytes.Buffer

			table, err := ccmctl.NewTable(&buf, tc.rd, tc.watch)
			require.NoError(t, err)

			for _, r := range tc.rows {
				require.NoError(t, table.Write(tc.event, r))
			}

			require.NoError(t, table.Flush())
			assert.Equal(t, strings.TrimPrefix(tc.want, "\n"), buf.String())
		})
	}
}

// TestTableWidthsKeptAcrossFlushes is a watch: the current resources are flushed as one table, then each
// event alone; the later rows stay under the header, and a longer value moves only its own row, as little
// as it can.
func TestTableWidthsKeptAcrossFlushes(t *testing.T) {
	t.Parallel()

	var buf bytes.Buffer

	table, err := ccmctl.NewTable(&buf, definition(t, node.NodeTransformExtension{}), true)
	require.NoError(t, err)

	require.NoError(t, table.Write("created", nodeTransform("worker-1", &specs.NodeTransformSpec{Platform: "gcp", ProviderId: "gce://p/z/worker-1"})))
	require.NoError(t, table.Flush())
	require.NoError(t, table.Write("updated", nodeTransform("w-2", &specs.NodeTransformSpec{Platform: "aws"})))
	require.NoError(t, table.Flush())
	require.NoError(t, table.Write("destroyed", nodeTransform("worker-100", &specs.NodeTransformSpec{Platform: "gcp"})))
	require.NoError(t, table.Flush())
	require.NoError(t, table.Write("created", nodeTransform("a-much-longer-name", &specs.NodeTransformSpec{Platform: "gcp"})))
	require.NoError(t, table.Write("created", nodeTransform("w-3", &specs.NodeTransformSpec{Platform: "gcp"})))
	require.NoError(t, table.Flush())

	assert.Equal(t, `EVENT       NAMESPACE   TYPE            ID         VERSION   PROVIDER ID          PLATFORM   INITIALIZE   PENDING
created     node        NodeTransform   worker-1   1         gce://p/z/worker-1   gcp        false        -
updated     node        NodeTransform   w-2        1         -                    aws        false        -
destroyed   node        NodeTransform   worker-100 1         -                    gcp        false        -
created     node        NodeTransform   a-much-longer-name 1 -                    gcp        false        -
created     node        NodeTransform   w-3        1         -                    gcp        false        -
`, buf.String())
}

func TestTableBadColumn(t *testing.T) {
	t.Parallel()

	_, err := ccmctl.NewTable(&bytes.Buffer{}, &meta.ResourceDefinitionSpec{
		Type:         "Things.x.tccm.dev",
		PrintColumns: []meta.PrintColumn{{Name: "Broken", JSONPath: "{.a["}},
	}, false)
	require.ErrorContains(t, err, `failed to parse print column "Broken" of Things.x.tccm.dev`)
}

func TestYAMLAndJSON(t *testing.T) {
	t.Parallel()

	nt := nodeTransform("aws-1", &specs.NodeTransformSpec{
		ProviderId: "aws:///eu-west-1a/i-1",
		Labels:     map[string]string{"topology.kubernetes.io/zone": "eu-west-1a"},
		Origins:    map[string]string{"providerID": "Talos platformMetadata.providerID"},
		Initialize: true,
	})

	var yamlOut bytes.Buffer

	y := ccmctl.NewYAMLWriter(&yamlOut)
	require.NoError(t, y.Write("", nt))
	require.NoError(t, y.Write("", nt))

	docs := strings.Split(yamlOut.String(), "---\n")
	require.Len(t, docs, 2)
	assert.Equal(t, docs[0], docs[1])
	assert.Contains(t, docs[0], "metadata:\n  namespace: node\n  type: NodeTransforms.node.tccm.dev\n  id: aws-1\n  version: 1\n")
	assert.Contains(t, docs[0], "spec:\n  providerID: aws:///eu-west-1a/i-1\n  labels:\n    topology.kubernetes.io/zone: eu-west-1a\n")
	assert.NotContains(t, docs[0], "event:")

	var jsonOut bytes.Buffer

	j := ccmctl.NewJSONWriter(&jsonOut)
	require.NoError(t, j.Write("created", nt))

	var doc struct {
		Event    string `json:"event"`
		Metadata struct {
			ID      string `json:"id"`
			Version int    `json:"version"`
		} `json:"metadata"`
		Spec map[string]any `json:"spec"`
	}

	require.NoError(t, json.Unmarshal(jsonOut.Bytes(), &doc))
	assert.Equal(t, "created", doc.Event)
	assert.Equal(t, "aws-1", doc.Metadata.ID)
	assert.Equal(t, 1, doc.Metadata.Version)
	assert.Equal(t, "aws:///eu-west-1a/i-1", doc.Spec["providerID"])
	assert.Equal(t, true, doc.Spec["initialize"])

	// The keys keep the order of the YAML form.
	out := jsonOut.String()
	assert.Less(t, strings.Index(out, `"event"`), strings.Index(out, `"metadata"`))
	assert.Less(t, strings.Index(out, `"metadata"`), strings.Index(out, `"spec"`))
	assert.Less(t, strings.Index(out, `"providerID"`), strings.Index(out, `"labels"`))
}

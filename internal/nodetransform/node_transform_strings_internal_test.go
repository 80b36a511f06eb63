package nodetransform

import (
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// awsInput is a bound Input of the Node name on an AWS machine at ip, every fact read from the machine
// anew (as each machine's session reads its own).
func awsInput(name, ip string) Input {
	return Input{
		NodeName: name,
		Node:     &specs.KubeNodeSpec{ProvidedNodeIps: []string{ip}, Uninitialized: true, Created: timestamppb.Now()},
		Platform: &specs.PlatformMetadataSpec{
			HasPlatformMetadata: true, Platform: strings.Clone("aws"), Region: strings.Clone("eu-west-1"), Zone: strings.Clone("eu-west-1b"),
			InstanceType: strings.Clone("m5.large"), ProviderId: "aws:///eu-west-1b/i-" + name, Hostname: name, Uuid: "uuid-" + name,
			Nodename: name, NodeIp: ip,
		},
		Addresses: &specs.MachineAddressesSpec{
			Addresses: []*specs.MachineAddress{{LinkName: "ens5", Address: ip + "/20", Scope: "global"}},
			Nodename:  name, NodeIp: ip,
		},
		Config: &specs.ConfigSpec{ClusterName: "bench", Source: "defaults"},
	}
}

// Two Nodes on like machines carry one copy of the strings their NodeTransforms repeat (labels, origins,
// platform), the addresses' origins among them.
func TestBuildSharesRepeatedStrings(t *testing.T) {
	t.Parallel()

	a, _ := Build(awsInput("w1", "10.0.0.1"))
	b, _ := Build(awsInput("w2", "10.0.0.2"))

	require.True(t, a.GetInitialize(), a.GetPending())
	require.True(t, b.GetInitialize(), b.GetPending())

	assert.True(t, sharedstrings.SameCopy(a.GetPlatform(), b.GetPlatform()), "platform")

	for _, key := range []string{kubekeys.LabelZone, kubekeys.LabelInstanceType, kubekeys.LabelPlatform} {
		assert.Equal(t, a.GetLabels()[key], b.GetLabels()[key], key)
		assert.True(t, sharedstrings.SameCopy(a.GetLabels()[key], b.GetLabels()[key]), "value of label %s", key)
	}

	keyOf := func(spec *specs.NodeTransformSpec, want string) string {
		for k := range spec.GetOrigins() {
			if k == want {
				return k
			}
		}

		t.Fatalf("no origin %s in %v", want, spec.GetOrigins())

		return ""
	}

	for _, key := range []string{node.OriginKey(node.OriginKindLabel, kubekeys.LabelZone), node.OriginKey(node.OriginKindLabel, kubekeys.LabelClusterName)} {
		assert.True(t, sharedstrings.SameCopy(keyOf(a, key), keyOf(b, key)), "origin key %s", key)
		assert.True(t, sharedstrings.SameCopy(a.GetOrigins()[key], b.GetOrigins()[key]), "origin of %s", key)
	}

	assert.Equal(t, a.GetOrigins(), b.GetOrigins(), "the addresses' origins are not in the origins: like machines have the same")
	assert.NotEmpty(t, a.GetAddressOrigins())
	assert.True(t, sharedstrings.SameCopy(a.GetAddressOrigins()[0], b.GetAddressOrigins()[0]), "the origin of the InternalIP")
}

// BenchmarkBuildRetained reports what the NodeTransforms of a fleet of like machines hold once stored: the
// heap a copy of each result keeps (the state stores a copy), per Node, after a collection.
func BenchmarkBuildRetained(b *testing.B) {
	const nodes = 2000

	inputs := make([]Input, nodes)
	for i := range inputs {
		inputs[i] = awsInput(fmt.Sprintf("worker-%04d", i), fmt.Sprintf("10.0.%d.%d", i/250, i%250+1))
	}

	heapAlloc := func() uint64 {
		runtime.GC()

		var m runtime.MemStats
		runtime.ReadMemStats(&m)

		return m.HeapAlloc
	}

	var retained uint64

	for b.Loop() {
		stored := make([]*specs.NodeTransformSpec, 0, nodes)
		before := heapAlloc()

		for _, in := range inputs {
			spec, _ := Build(in)
			stored = append(stored, spec.CloneVT())
		}

		retained = heapAlloc() - before

		runtime.KeepAlive(stored)
	}

	b.ReportMetric(float64(retained)/nodes, "retained-B/node")
}

package talos_test

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/cosistate"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/testheap"
)

// sameMap reports whether a and b are one map, not two maps of the same contents.
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// gcpMachine is the PlatformMetadata of machine i of a GCP fleet, whose tags (the project's labels) are the
// same for every machine, with maps of its own, as the Talos source writes it.
func gcpMachine(i int) *talos.PlatformMetadata {
	name := fmt.Sprintf("worker-%05d", i)

	res := talos.NewPlatformMetadata(talos.NamespaceName, name)
	res.TypedSpec().Value = &specs.PlatformMetadataSpec{
		Platform: "gcp", Hostname: name, Nodename: name, Region: "europe-west4", Zone: "europe-west4-a",
		InstanceType: "e2-standard-4", InstanceId: fmt.Sprint(4_000_000_000_000_000_000 + i),
		ProviderId:          "gce://talos-sim/europe-west4-a/" + name,
		Tags:                map[string]string{"goog-gke-node": "false", "env": "sim"},
		HasPlatformMetadata: true, NodeIp: fmt.Sprintf("10.%d.%d.1", i/256, i%256),
	}

	return res
}

// Copies of PlatformMetadatas with the same tags, and the PlatformMetadatas decoded, hold one map of them; a
// copy is equal to its original. Tags that name their machine (an AWS instance's Name) stay its own.
func TestPlatformMetadataCopiesShareTags(t *testing.T) {
	t.Parallel()

	a, b := gcpMachine(1), gcpMachine(2)
	ca, cb := a.DeepCopy(), b.DeepCopy()

	require.True(t, resource.Equal(a, ca), "a copy is equal to its original")

	tagsOf := func(r resource.Resource) map[string]string {
		return r.(*talos.PlatformMetadata).TypedSpec().Value.GetTags() //nolint:forcetypeassert
	}

	assert.True(t, sameMap(tagsOf(ca), tagsOf(cb)), "the same tags: one map")
	assert.False(t, sameMap(tagsOf(a), tagsOf(ca)), "not the writer's map")

	marshaler := store.ProtobufMarshaler{}

	data, err := marshaler.MarshalResource(a)
	require.NoError(t, err)

	decoded, err := marshaler.UnmarshalResource(data)
	require.NoError(t, err)
	assert.True(t, sameMap(tagsOf(ca), tagsOf(decoded)), "a decoded PlatformMetadata holds the shared map")

	named := gcpMachine(3)
	named.TypedSpec().Value.Tags = map[string]string{"Name": "worker-00003", "team": "storage"}
	other := gcpMachine(4)
	other.TypedSpec().Value.Tags = map[string]string{"Name": "worker-00003", "team": "storage"}

	assert.False(t, sameMap(tagsOf(named.DeepCopy()), tagsOf(other.DeepCopy())), "tags that name a machine are its own")
	assert.Equal(t, tagsOf(named), tagsOf(named.DeepCopy()))
}

// platformMetadataRetainedPerMachine returns the heap the PlatformMetadatas of n machines keep in the state
// talos-ccm runs with, per machine; the specs written are made before.
func platformMetadataRetainedPerMachine(tb testing.TB, n int) float64 {
	tb.Helper()

	written := make([]resource.Resource, n)
	for i := range written {
		written[i] = gcpMachine(i)
	}

	st := cosistate.NewMemoryState()

	return testheap.StoredPer(tb, n, written, func(ctx context.Context, res resource.Resource) error { return st.Create(ctx, res) })
}

// TestPlatformMetadataRetained: a GCP fleet's PlatformMetadatas hold one map of the project's tags, not one
// each (2,000 machines of two tags: 1,018 bytes per machine with maps of their own, 682 sharing them). With
// TALOS_CCM_CHECK_SHARED_READS set, as the tests run, the state keeps a copy of every resource besides:
// 2,028 bytes with maps of their own, 1,356 sharing them.
func TestPlatformMetadataRetained(t *testing.T) { //nolint:paralleltest // It counts the process's heap.
	testheap.AtMostStored(t, "bytes per machine", platformMetadataRetainedPerMachine(t, 2000), 760)
}

// BenchmarkPlatformMetadataRetained reports the heap a machine's PlatformMetadata keeps in the state
// (B/machine).
func BenchmarkPlatformMetadataRetained(b *testing.B) {
	testheap.Report(b, "B/machine", func() float64 { return platformMetadataRetainedPerMachine(b, 2000) })
}

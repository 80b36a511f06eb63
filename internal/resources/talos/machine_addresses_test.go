package talos_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// A MachineAddresses' copy shares its address messages, which nobody changes in place, and has its lists of
// its own; it is equal to its original until it changes (resource.Equal: the runtime writes no unchanged
// MachineAddresses).
func TestMachineAddressesCopySharesAddresses(t *testing.T) {
	t.Parallel()

	res := talos.NewMachineAddresses(talos.NamespaceName, "worker-1")
	res.TypedSpec().Value = &specs.MachineAddressesSpec{
		Addresses:        []*specs.MachineAddress{{Address: "10.0.0.1/24", LinkName: "eth0", Flags: []string{"permanent"}}},
		NodeIp:           "10.0.0.1",
		ExcludedPrefixes: []string{"10.244.0.0/16"},
	}

	cp, ok := res.DeepCopy().(*talos.MachineAddresses)
	require.True(t, ok)
	require.True(t, resource.Equal(res, cp))

	orig, copied := res.TypedSpec().Value, cp.TypedSpec().Value

	assert.Same(t, orig.GetAddresses()[0], copied.GetAddresses()[0], "one message")

	copied.Addresses = append(copied.Addresses, &specs.MachineAddress{Address: "10.0.0.2/24"})
	copied.ExcludedPrefixes[0] = "changed"

	assert.Len(t, orig.GetAddresses(), 1)
	assert.Equal(t, []string{"10.244.0.0/16"}, orig.GetExcludedPrefixes())
	assert.False(t, resource.Equal(res, cp), "a changed copy is not equal")
}

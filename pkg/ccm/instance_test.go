package ccm_test

import (
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// A client configuration that is never dialed: nothing here starts the informers.
var unusedRestConfig = &rest.Config{Host: "https://127.0.0.1:1"}

// TestRegisterRefusesNamespacePrefix: Register into a runtime over the host's state cannot move the
// controllers' namespaces, and says to use New.
func TestRegisterRefusesNamespacePrefix(t *testing.T) {
	t.Parallel()

	st := ccm.NewState()

	rt, err := runtime.NewRuntime(st, zaptest.NewLogger(t))
	require.NoError(t, err)

	_, err = ccm.Register(t.Context(), rt, st, ccm.Options{RestConfig: unusedRestConfig, NamespacePrefix: "alpha:"})
	require.Error(t, err)
	assert.ErrorContains(t, err, "needs ccm.New")

	// Nothing was registered: the state has no definitions.
	list, err := safe.StateListAll[*meta.Namespace](t.Context(), st)
	require.NoError(t, err)
	assert.Zero(t, list.Len())
}

// TestNewWithNamespacePrefix: New registers the pipeline's namespace and resource definitions into the
// host's state under the prefix, and the instance's state is the view, in talos-ccm's namespaces.
func TestNewWithNamespacePrefix(t *testing.T) {
	t.Parallel()

	host := ccm.NewState()

	instance, err := ccm.New(t.Context(), host, ccm.Options{RestConfig: unusedRestConfig, NamespacePrefix: "alpha:"})
	require.NoError(t, err)

	defer instance.CCM().Close()

	// The host's state holds the definitions in alpha:meta, not in meta.
	stored, err := safe.StateList[*meta.Namespace](t.Context(), host,
		resource.NewMetadata(ccm.HostNamespace("alpha:", meta.NamespaceName), meta.NamespaceType, "", resource.VersionUndefined))
	require.NoError(t, err)
	assert.Positive(t, stored.Len())

	_, err = host.Get(t.Context(), meta.NewNamespace(ccm.NodeNamespace, meta.NamespaceSpec{}).Metadata())
	assert.True(t, state.IsNotFoundError(err), "the host's own meta namespace was written: %v", err)

	// The view shows them in meta, as talos-ccm registered them.
	viewed, err := safe.StateGet[*meta.Namespace](t.Context(), instance.State(),
		meta.NewNamespace(ccm.NodeNamespace, meta.NamespaceSpec{}).Metadata())
	require.NoError(t, err)
	assert.Equal(t, meta.NamespaceName, viewed.Metadata().Namespace())

	rd, err := safe.StateGet[*meta.ResourceDefinition](t.Context(), instance.State(),
		resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(ccm.PlatformMetadataType), resource.VersionUndefined))
	require.NoError(t, err)
	assert.Equal(t, ccm.TalosNamespace, rd.TypedSpec().DefaultNamespace)
}

// TestNewRefusesInvalidNamespacePrefix: a prefix that is not a DNS label and the separator is refused
// before anything is created.
func TestNewRefusesInvalidNamespacePrefix(t *testing.T) {
	t.Parallel()

	for _, prefix := range []string{"alpha", "Alpha:", "alpha/"} {
		_, err := ccm.New(t.Context(), nil, ccm.Options{RestConfig: unusedRestConfig, NamespacePrefix: prefix})
		assert.ErrorContains(t, err, "invalid namespace prefix", prefix)
	}
}

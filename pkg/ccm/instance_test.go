package ccm_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"

	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// A client configuration that is never dialed: nothing here starts the informers.
var unusedRestConfig = &rest.Config{Host: "https://127.0.0.1:1"}

// TestRegisterWithNamespacePrefix: Register with a prefix adds one controller per prefix to the host's
// runtime, registers the pipeline's definitions into the host's state under the prefix at once, and returns
// a handle whose state is the prefixed view; nothing runs before the host's runtime does.
func TestRegisterWithNamespacePrefix(t *testing.T) {
	t.Parallel()

	host := ccm.NewState()

	rt, err := runtime.NewRuntime(host, zaptest.NewLogger(t))
	require.NoError(t, err)

	for _, prefix := range []string{"alpha:", "beta:"} {
		pipeline, err := ccm.Register(t.Context(), rt, host, ccm.Options{RestConfig: unusedRestConfig, NamespacePrefix: prefix})
		require.NoError(t, err, prefix)

		assert.Equal(t, []string{ccm.ControllerCloudNode, ccm.ControllerCSRApproval, ccm.ControllerNodeLifecycle}, pipeline.Controllers())

		// The definitions are in the host's state under the prefix, and the handle's state shows them in
		// talos-ccm's own namespace.
		stored, err := safe.StateList[*meta.ResourceDefinition](t.Context(), host,
			resource.NewMetadata(ccm.HostNamespace(prefix, meta.NamespaceName), meta.ResourceDefinitionType, "", resource.VersionUndefined))
		require.NoError(t, err)
		assert.Positive(t, stored.Len(), prefix)

		rd, err := safe.StateGet[*meta.ResourceDefinition](t.Context(), pipeline.State(),
			resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(ccm.NodeTransformType), resource.VersionUndefined))
		require.NoError(t, err, prefix)
		assert.Equal(t, ccm.NodeNamespace, rd.TypedSpec().DefaultNamespace)

		// The host's runtime starts and stops the pipeline: before it runs, there is no Node and no cache.
		pipeline.Start(t.Context())
		pipeline.Close()

		nodes, err := pipeline.NodeLister().List(labels.Everything())
		require.NoError(t, err)
		assert.Empty(t, nodes)

		_, err = pipeline.NodeLister().Get("worker-1")
		assert.True(t, apierrors.IsNotFound(err), "%v", err)

		waitCtx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		assert.False(t, pipeline.WaitForCacheSync(waitCtx))
		cancel()
	}

	// The host's own meta namespace is untouched.
	list, err := safe.StateListAll[*meta.Namespace](t.Context(), host)
	require.NoError(t, err)
	assert.Zero(t, list.Len())

	// One controller per prefix: the same prefix again is refused by the host's runtime.
	_, err = ccm.Register(t.Context(), rt, host, ccm.Options{RestConfig: unusedRestConfig, NamespacePrefix: "alpha:"})
	assert.ErrorContains(t, err, fmt.Sprintf("%q already registered", ccm.PipelineControllerName("alpha:")))
}

// TestRegisterWithNamespacePrefixChecksOptions: Register reports bad options itself, rather than leaving
// them to a pipeline controller that would fail at every restart.
func TestRegisterWithNamespacePrefixChecksOptions(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name string
		opts ccm.Options
		want string
	}{
		{"invalid prefix", ccm.Options{RestConfig: unusedRestConfig, NamespacePrefix: "Alpha:"}, "invalid namespace prefix"},
		{"no client configuration", ccm.Options{NamespacePrefix: "alpha:"}, "no Kubernetes client configuration"},
		{"unknown controller", ccm.Options{RestConfig: unusedRestConfig, NamespacePrefix: "alpha:", Controllers: []string{"cloud-nod"}}, "unknown controller"},
		{"node-ipam without Talos", ccm.Options{RestConfig: unusedRestConfig, NamespacePrefix: "alpha:", Controllers: []string{"*", ccm.ControllerNodeIPAM}}, "needs the Talos API"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			host := ccm.NewState()

			rt, err := runtime.NewRuntime(host, zaptest.NewLogger(t))
			require.NoError(t, err)

			_, err = ccm.Register(t.Context(), rt, host, tt.opts)
			require.ErrorContains(t, err, tt.want)

			// The controller was not registered: a valid pipeline of the same prefix still can be.
			if tt.opts.NamespacePrefix == "alpha:" {
				_, err = ccm.Register(t.Context(), rt, host, ccm.Options{RestConfig: unusedRestConfig, NamespacePrefix: "alpha:"})
				require.NoError(t, err)
			}
		})
	}
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

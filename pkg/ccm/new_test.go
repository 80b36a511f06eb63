package ccm_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
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

// TestNew: New registers the pipeline's namespaces and resource definitions into its state and the
// default controllers into its runtime, and reaches nothing before Run: no Node, no cache.
func TestNew(t *testing.T) {
	t.Parallel()

	pipeline, err := ccm.New(t.Context(), nil, ccm.Options{RestConfig: unusedRestConfig, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)

	defer pipeline.Close()

	assert.Equal(t, []string{ccm.ControllerCloudNode, ccm.ControllerCSRApproval, ccm.ControllerNodeLifecycle}, pipeline.Controllers())

	rd, err := safe.StateGet[*meta.ResourceDefinition](t.Context(), pipeline.State(),
		resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(ccm.NodeTransformType), resource.VersionUndefined))
	require.NoError(t, err)
	assert.Equal(t, ccm.NodeNamespace, rd.TypedSpec().DefaultNamespace)

	graph, err := pipeline.Runtime().GetDependencyGraph()
	require.NoError(t, err)
	assert.NotEmpty(t, graph.Edges, "the controllers are registered into the pipeline's runtime")

	nodes, err := pipeline.NodeLister().List(labels.Everything())
	require.NoError(t, err)
	assert.Empty(t, nodes)

	_, err = pipeline.NodeLister().Get("worker-1")
	assert.True(t, apierrors.IsNotFound(err), "%v", err)

	select {
	case <-pipeline.Ready():
		t.Fatal("ready before Run")
	default:
	}

	// A pipeline built again over the same state keeps what is there.
	again, err := ccm.New(t.Context(), pipeline.State(), ccm.Options{RestConfig: unusedRestConfig})
	require.NoError(t, err)

	again.Close()
	again.Close() // Close is safe to call again.
}

// TestNewChecksOptions: New reports bad options before anything runs.
func TestNewChecksOptions(t *testing.T) {
	t.Parallel()

	for _, tt := range []struct {
		name string
		opts ccm.Options
		want string
	}{
		{"no client configuration", ccm.Options{}, "no Kubernetes client configuration"},
		{"unknown controller", ccm.Options{RestConfig: unusedRestConfig, Controllers: []string{"cloud-nod"}}, "unknown controller"},
		{"node-ipam without Talos", ccm.Options{RestConfig: unusedRestConfig, Controllers: []string{"*", ccm.ControllerNodeIPAM}}, "needs the Talos API"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()

			_, err := ccm.New(t.Context(), nil, tt.opts)
			require.ErrorContains(t, err, tt.want)
		})
	}
}

// TestRunEndsWithItsContext: Run returns nil once its context ends, also before the informers synced (the
// apiserver cannot be reached).
func TestRunEndsWithItsContext(t *testing.T) {
	t.Parallel()

	pipeline, err := ccm.New(t.Context(), nil, ccm.Options{RestConfig: unusedRestConfig, Logger: zaptest.NewLogger(t)})
	require.NoError(t, err)

	defer pipeline.Close()

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()

	require.NoError(t, pipeline.Run(ctx))
}

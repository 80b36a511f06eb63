package ccm

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap/zaptest"
	"k8s.io/client-go/rest"

	csrres "github.com/talos-ccm/talos-ccm/internal/resources/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// TestNodeMirrorCarriesItsConsumersFinalizers checks, for every selection of controllers, that the Node
// and request mirrors, and the decisions about Nodes and requests, are written with the finalizers of
// exactly the controllers registered with them as their primary input: one missing costs an update of
// every resource, one too many (a controller that does not run) keeps every deleted Node's resources torn
// down for ever.
func TestNodeMirrorCarriesItsConsumersFinalizers(t *testing.T) {
	t.Parallel()

	for _, controllers := range [][]string{
		{"*"},
		{ControllerCloudNode},
		{ControllerNodeLifecycle},
		{ControllerCSRApproval},
		{ControllerCSRApproval, ControllerNodeLifecycle},
		allControllers,
	} {
		t.Run(strings.Join(controllers, ","), func(t *testing.T) {
			t.Parallel()

			c, err := New(t.Context(), nil, Options{
				RestConfig:  &rest.Config{Host: "https://127.0.0.1:1"},
				Logger:      zaptest.NewLogger(t),
				Controllers: controllers,
				HostFacts:   true,
				NodeIPAM:    NodeIPAMOptions{ClusterCIDRs: []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}},
			})
			require.NoError(t, err)

			defer c.Close()

			graph, err := c.Runtime().GetDependencyGraph()
			require.NoError(t, err)

			consumers := func(typ resource.Type) []string {
				var names []string

				for _, edge := range graph.Edges {
					if edge.EdgeType == controller.EdgeInputStrong && edge.ResourceType == typ {
						names = append(names, edge.ControllerName)
					}
				}

				slices.Sort(names)

				return names
			}

			for _, typ := range []resource.Type{
				kube.KubeNodeType, kube.KubeCSRType, node.NodeTransformType, node.NodeLifecycleType, csrres.CSRDecisionType,
			} {
				require.Equal(t, consumers(typ), slices.Sorted(slices.Values(c.heldBy[typ])), typ)
			}

			// The mirrors are written with their consumers' finalizers.
			require.Equal(t, c.heldBy[kube.KubeNodeType], c.nodeMirror.Finalizers, "Node mirror")

			if c.csrMirror != nil {
				require.Equal(t, c.heldBy[kube.KubeCSRType], c.csrMirror.Finalizers, "request mirror")
			}
		})
	}
}

package talos

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"google.golang.org/grpc/metadata"
)

// withNode names one machine in the calls' metadata, whether the context carried metadata before or not,
// and never the one-to-many "nodes", which apid refuses for COSI calls.
func TestWithNode(t *testing.T) {
	t.Parallel()

	for name, ctx := range map[string]context.Context{
		"no metadata": t.Context(),
		"other nodes": metadata.NewOutgoingContext(t.Context(), metadata.Pairs("nodes", "10.0.0.9", "node", "10.0.0.8", "runtime", "Talos")),
		"appended":    metadata.AppendToOutgoingContext(t.Context(), "nodes", "10.0.0.9", "node", "10.0.0.8"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			md, ok := metadata.FromOutgoingContext(withNode(ctx, "10.0.0.5"))
			assert.True(t, ok)
			assert.Equal(t, []string{"10.0.0.5"}, md.Get("node"))
			assert.Empty(t, md.Get("nodes"))

			if name == "other nodes" {
				assert.Equal(t, []string{"Talos"}, md.Get("runtime"), "the other metadata is kept")
			}
		})
	}
}

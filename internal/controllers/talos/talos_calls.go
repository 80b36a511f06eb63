package talos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cosi-project/runtime/api/v1alpha1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/talos-ccm/talos-ccm/internal/metrics"
)

// talosAPI is the COSI state service of the Talos API, called directly over the connection a source is
// given: the machines' resources arrive as their protobuf specs, decoded into the definitions Talos
// publishes for them, with no resource registry and no reader goroutine per watch.
type talosAPI struct {
	state v1alpha1.StateClient
}

func newTalosAPI(conn grpc.ClientConnInterface) talosAPI {
	return talosAPI{state: v1alpha1.NewStateClient(conn)}
}

// withNode addresses the calls made with ctx to one machine, as the machinery client's WithNode does: apid
// routes a request on its "node" metadata (and refuses "nodes", the one-to-many form, for COSI calls).
//
// A session's context carries no metadata before (what the Talos connection adds, it adds to each call):
// the node is then appended to the metadata, which keeps it as a pair, where a metadata map built for it
// took a few hundred bytes of every session, for as long as the session lasts.
func withNode(ctx context.Context, node string) context.Context {
	md, ok := metadata.FromOutgoingContext(ctx)
	if !ok {
		return metadata.AppendToOutgoingContext(ctx, "node", node)
	}

	md.Delete("nodes")
	md.Set("node", node)

	return metadata.NewOutgoingContext(ctx, md)
}

// get reads one resource of the machine ctx addresses (withNode) into spec, within timeout, and reports
// whether the machine has it: a resource the machine does not have is no error. Every call is counted by
// type and result.
func (api talosAPI) get(ctx context.Context, r talosResource, spec proto.Message, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	resp, err := api.state.Get(ctx, &v1alpha1.GetRequest{Namespace: r.namespace, Type: r.typ, Id: r.id, Options: &v1alpha1.GetOptions{}})

	switch {
	case err == nil:
		err = decodeSpec(resp.GetResource(), r, spec)
	case status.Code(err) == codes.NotFound:
		metrics.TalosCalls.WithLabelValues("get", r.typ, "not_found").Inc()

		return false, nil
	}

	result := "ok"
	if err != nil {
		result = "error"
	}

	metrics.TalosCalls.WithLabelValues("get", r.typ, result).Inc()

	return err == nil, err
}

// decodeSpec decodes the protobuf spec of res, a resource of r's type, into spec.
func decodeSpec(res *v1alpha1.Resource, r talosResource, spec proto.Message) error {
	if typ := res.GetMetadata().GetType(); typ != r.typ {
		return fmt.Errorf("failed to decode %s: the machine sent a %q", r.typ, typ)
	}

	if res.GetSpec() == nil {
		return fmt.Errorf("failed to decode %s: no spec", r.typ)
	}

	if err := proto.Unmarshal(res.GetSpec().GetProtoSpec(), spec); err != nil {
		return fmt.Errorf("failed to decode %s: %w", r.typ, err)
	}

	return nil
}

// watchKind opens a watch of the machine's resources of kind (ctx addresses the machine), their current
// contents first, and takes the stream's opening message. bookmark, when set, resumes an earlier watch of
// the same kind from the event it names, with no contents. The watch is counted by type and result. Its
// messages can be received undecoded, as watchFrames.
func (api talosAPI) watchKind(ctx context.Context, kind talosResource, bookmark []byte) (v1alpha1.State_WatchClient, error) {
	opts := &v1alpha1.WatchOptions{BootstrapContents: bookmark == nil, StartFromBookmark: bookmark}

	stream, err := api.state.Watch(ctx, &v1alpha1.WatchRequest{Namespace: kind.namespace, Type: kind.typ, Options: opts, ApiVersion: 1}, watchFramesCodec)
	if err == nil {
		// The server opens every watch with an empty message, once it has started watching.
		_, err = stream.Recv()
	}

	result := "ok"
	if err != nil {
		result = "error"
	}

	metrics.TalosCalls.WithLabelValues("watch", kind.typ, result).Inc()

	if err != nil {
		return nil, fmt.Errorf("failed to watch %s: %w", kind.typ, err)
	}

	return stream, nil
}

// errInvalidBookmark says that a watch cannot resume from its bookmark: the machine's state is not the one
// the bookmark was taken from (it rebooted).
var errInvalidBookmark = errors.New("the watch cannot resume: the machine's state changed under it")

// isInvalidBookmark reports whether err refuses a watch's bookmark.
func isInvalidBookmark(err error) bool {
	return status.Code(err) == codes.FailedPrecondition
}

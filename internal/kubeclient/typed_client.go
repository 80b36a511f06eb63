package kubeclient

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// TypedClient reads and writes one resource of one namespace (or of the cluster) with the methods, and their
// signatures, of client-go's typed clients. client-go's own generic typed client (gentype) also carries the
// fake clients' support, which links client-go's object tracker and with it strategic merge patches,
// managed fields and the OpenAPI models: megabytes of code in every talos-ccm pod for tests.
type TypedClient[PE object[E], E any] struct {
	client              rest.Interface
	resource, namespace string
}

// ListClient is a TypedClient that also lists and watches.
type ListClient[PE object[E], PL list[L], E, L any] struct {
	TypedClient[PE, E]
}

// object is a pointer to a Kubernetes object type E.
type object[E any] interface {
	*E
	runtime.Object
	metav1.Object
}

// list is a pointer to a Kubernetes list type L.
type list[L any] interface {
	*L
	runtime.Object
}

// request starts a request of verb on the resource, in protobuf unless the configuration says otherwise.
func (c *TypedClient[PE, E]) request(verb func() *rest.Request) *rest.Request {
	return verb().UseProtobufAsDefault().NamespaceIfScoped(c.namespace, c.namespace != "").Resource(c.resource)
}

// Get reads the object name. Reads are rare (a write's conflict), and client-go's Do tries a GET again
// after a connection reset, which into does not: Do reads its answer.
func (c *TypedClient[PE, E]) Get(ctx context.Context, name string, opts metav1.GetOptions) (PE, error) {
	result := PE(new(E))
	err := c.request(c.client.Get).Name(name).VersionedParams(&opts, ParameterCodec).Do(ctx).Into(result)

	return result, err //nolint:wrapcheck // The signature is client-go's: its errors are the apiserver's.
}

// Create creates obj, and returns it as the apiserver stored it.
func (c *TypedClient[PE, E]) Create(ctx context.Context, obj PE, opts metav1.CreateOptions) (PE, error) {
	result := PE(new(E))

	return result, c.into(ctx, c.request(c.client.Post).VersionedParams(&opts, ParameterCodec).Body(obj), result)
}

// Update replaces obj (guarded by its resourceVersion, when it has one).
func (c *TypedClient[PE, E]) Update(ctx context.Context, obj PE, opts metav1.UpdateOptions) (PE, error) {
	result := PE(new(E))

	return result, c.into(ctx, c.request(c.client.Put).Name(obj.GetName()).VersionedParams(&opts, ParameterCodec).Body(obj), result)
}

// UpdateStatus replaces the status of obj.
func (c *TypedClient[PE, E]) UpdateStatus(ctx context.Context, obj PE, opts metav1.UpdateOptions) (PE, error) {
	result := PE(new(E))

	return result, c.into(ctx, c.request(c.client.Put).Name(obj.GetName()).SubResource("status").VersionedParams(&opts, ParameterCodec).Body(obj), result)
}

// Patch patches the object name (or one of its subresources) with data, a patch of type pt.
func (c *TypedClient[PE, E]) Patch(
	ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string,
) (PE, error) {
	result := PE(new(E))
	req := c.request(func() *rest.Request { return c.client.Patch(pt) }).
		Name(name).SubResource(subresources...).VersionedParams(&opts, ParameterCodec).Body(data)

	return result, c.into(ctx, req, result)
}

// answerDecoder returns the decoder of data, the body of an answer: protobuf's when data starts with its
// magic, else JSON's. Those are the media types the clients ask for (a server that takes */* answers in
// JSON), and Stream does not say which one the server chose, as Do's Content-Type does. Both decoders are
// made once, with the client.
func (c negotiatingClient) answerDecoder(data []byte) (runtime.Decoder, error) { //nolint:ireturn
	decoder, mediaType := c.json, runtime.ContentTypeJSON
	if bytes.HasPrefix(data, protobufMagic) {
		decoder, mediaType = c.protobuf, runtime.ContentTypeProtobuf
	}

	if decoder == nil {
		return nil, fmt.Errorf("failed to decode the answer: no decoder of %s", mediaType)
	}

	return decoder, nil
}

// maxPooledAnswer is the largest buffer answerBuffers keeps: one that grew for a larger answer goes.
const maxPooledAnswer = 256 << 10

// answerBuffers hold the answers of the requests into reads while it decodes them.
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// into sends req, a write, and decodes the object the apiserver answers with into result. With the REST
// clients of NewForConfig, which know their serializer, it reads the answer into a buffer of a pool:
// client-go's Do reads every answer with io.ReadAll, whose buffer starts at 512 bytes and doubles, so that a
// Node as a kubelet posts it, which the apiserver returns after every write, left about 25 KB of garbage
// per write (an eighth of all talos-ccm allocated while 5,000 Nodes joined). Any other client goes through
// Do. The answers that are errors are read by client-go as Do reads them (Stream gives the same errors, and
// tries a write again after a Retry-After as Do does); a request asks for what Do's asks for.
func (c *TypedClient[PE, E]) into(ctx context.Context, req *rest.Request, result runtime.Object) error {
	negotiating, ok := c.client.(negotiatingClient)
	if !ok {
		return req.Do(ctx).Into(result) //nolint:wrapcheck // The signature is client-go's: its errors are the apiserver's.
	}

	body, err := req.Stream(ctx)
	if err != nil {
		return err //nolint:wrapcheck // As Do.
	}

	defer body.Close() //nolint:errcheck // Read to its end, or failed.

	buf := answerBuffers.Get().(*bytes.Buffer) //nolint:forcetypeassert // The pool's own.
	defer func() {
		if buf.Cap() <= maxPooledAnswer {
			buf.Reset()
			answerBuffers.Put(buf)
		}
	}()

	if _, err = buf.ReadFrom(body); err != nil {
		return fmt.Errorf("failed to read the answer: %w", err)
	}

	decoder, err := negotiating.answerDecoder(buf.Bytes())
	if err != nil {
		return err
	}

	// The decoders copy what they keep: the buffer goes back to the pool.
	out, _, err := decoder.Decode(buf.Bytes(), nil, result)
	if err != nil {
		return fmt.Errorf("failed to decode the answer: %w", err)
	}

	if out != result {
		return fmt.Errorf("failed to decode the answer: a %T instead of a %T", out, result)
	}

	return nil
}

// Delete deletes the object name.
func (c *TypedClient[PE, E]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return c.request(c.client.Delete).Name(name).Body(&opts).Do(ctx).Error() //nolint:wrapcheck // As Get.
}

// List lists the objects that opts select.
func (c *ListClient[PE, PL, E, L]) List(ctx context.Context, opts metav1.ListOptions) (PL, error) {
	result := PL(new(L))
	err := c.request(c.client.Get).VersionedParams(&opts, ParameterCodec).Timeout(timeoutOf(opts)).Do(ctx).Into(result)

	return result, err //nolint:wrapcheck // The signature is client-go's: its errors are the apiserver's.
}

// Watch watches the objects that opts select.
func (c *ListClient[PE, PL, E, L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) { //nolint:ireturn
	opts.Watch = true

	return c.request(c.client.Get).VersionedParams(&opts, ParameterCodec).Timeout(timeoutOf(opts)).Watch(ctx) //nolint:wrapcheck // As Get.
}

// timeoutOf is the client-side timeout of a list or watch: the server's, when opts set one.
func timeoutOf(opts metav1.ListOptions) time.Duration {
	if opts.TimeoutSeconds == nil {
		return 0
	}

	return time.Duration(*opts.TimeoutSeconds) * time.Second
}

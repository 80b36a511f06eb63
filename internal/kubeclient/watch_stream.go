package kubeclient

import (
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// negotiatingClient is a REST client with what decodes its watch streams: the serializer it negotiates with,
// and the one media type its watches ask for. client-go's REST client keeps both to itself, and decodes a
// watch in a goroutine of its own.
type negotiatingClient struct {
	rest.Interface

	serializer runtime.NegotiatedSerializer
	mediaType  string
	// protobuf and json decode the answers of writes (see answerDecoder); nil when the serializer has none.
	protobuf, json runtime.Decoder
}

// watchMediaType is the media type of the watch streams of the clients of cfg: the first it accepts, else
// the one it sends, else protobuf, as the typed clients ask for (see TypedClient.request).
func watchMediaType(cfg *rest.Config) string {
	preferred := cfg.AcceptContentTypes
	if preferred == "" {
		preferred = cfg.ContentType
	}

	first, _, _ := strings.Cut(preferred, ",")

	mediaType, _, err := mime.ParseMediaType(strings.TrimSpace(first))
	if err != nil || mediaType == "" || strings.Contains(mediaType, "*") {
		return runtime.ContentTypeProtobuf
	}

	return mediaType
}

// eventStreamer opens watches as streams its caller decodes in its own goroutine.
type eventStreamer interface {
	watchEvents(ctx context.Context, opts metav1.ListOptions) (eventReader, error)
}

// watchEvents watches the objects that opts select, as Watch does, but returns the stream undecoded: the
// caller's next reads and decodes one event at a time, where client-go's watch decodes them in a goroutine
// of its own and hands them over through a channel. Once ctx ends, the stream's reads fail: the request
// was made with ctx.
func (c *ListClient[PE, PL, E, L]) watchEvents(ctx context.Context, opts metav1.ListOptions) (eventReader, error) { //nolint:ireturn
	negotiating, ok := c.client.(negotiatingClient)
	if !ok {
		w, err := c.Watch(ctx, opts)
		if err != nil {
			return nil, err
		}

		return channelEvents{ctx: ctx, w: w}, nil
	}

	opts.Watch = true

	// The watch asks for one media type only, so that the stream's is known: Stream does not say which the
	// server chose. Every apiserver serves built-in types in protobuf and JSON. The stream is decoded with the
	// client's own serializer: the Nodes client's trims the Nodes. Unlike Watch, Stream takes a token of
	// the client's rate limiter: one per watch, every half hour to hour.
	body, err := c.request(c.client.Get).
		VersionedParams(&opts, ParameterCodec).
		Timeout(timeoutOf(opts)).
		SetHeader("Accept", negotiating.mediaType).
		Stream(ctx)
	if err != nil {
		return nil, err //nolint:wrapcheck // As Watch.
	}

	return newStreamEvents(body, negotiating.serializer, negotiating.mediaType)
}

// newStreamEvents returns the events of the watch stream body, of media type mediaType, decoded by
// serializer. It closes body when it fails.
func newStreamEvents(body io.ReadCloser, serializer runtime.NegotiatedSerializer, mediaType string) (eventReader, error) { //nolint:ireturn
	// The decoder is the serializer's, unconverted (as the clients', see NewForConfig): the version is unused.
	objects, envelopes, framer, err := runtime.NewClientNegotiator(serializer, schema.GroupVersion{}).StreamDecoder(mediaType, nil)
	if err != nil {
		body.Close() //nolint:errcheck // The stream is unread.

		return nil, fmt.Errorf("failed to decode a watch stream: %w", err)
	}

	if mediaType == runtime.ContentTypeProtobuf {
		return &protobufEvents{body: body, objects: objects}, nil
	}

	return streamEvents{restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(body), envelopes), objects)}, nil
}

// streamEvents reads the events of a watch stream, one frame at a time, in the caller's goroutine.
type streamEvents struct {
	decoder *restclientwatch.Decoder
}

func (e streamEvents) next() (watch.EventType, runtime.Object, error) { //nolint:ireturn
	return e.decoder.Decode() //nolint:wrapcheck // io.EOF is the watch's normal end; the loop says what failed.
}

func (e streamEvents) close() { e.decoder.Close() }

// newNegotiatingClient returns the REST client of cfg, which sends its requests through httpClient.
func newNegotiatingClient(cfg *rest.Config, httpClient *http.Client) (rest.Interface, error) { //nolint:ireturn
	client, err := rest.RESTClientForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err //nolint:wrapcheck // NewForConfig says what failed.
	}

	negotiator := runtime.NewClientNegotiator(cfg.NegotiatedSerializer, schema.GroupVersion{})
	protobuf, _ := negotiator.Decoder(runtime.ContentTypeProtobuf, nil)
	json, _ := negotiator.Decoder(runtime.ContentTypeJSON, nil)

	return negotiatingClient{
		Interface: client, serializer: cfg.NegotiatedSerializer, mediaType: watchMediaType(cfg), protobuf: protobuf, json: json,
	}, nil
}

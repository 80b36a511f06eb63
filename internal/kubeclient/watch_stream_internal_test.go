package kubeclient

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"
)

// watchStreamOf is the watch stream, in mediaType, of the events of nodes (each typed as its name says:
// the name is the event's type).
func watchStreamOf(t testing.TB, mediaType string, nodes ...*corev1.Node) []byte {
	t.Helper()

	info, ok := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), mediaType)
	require.True(t, ok, mediaType)

	var stream bytes.Buffer

	events := streaming.NewEncoder(info.StreamSerializer.NewFrameWriter(&stream), info.StreamSerializer.Serializer)
	objects := Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)

	for _, n := range nodes {
		raw, err := runtime.Encode(objects, n)
		require.NoError(t, err)
		require.NoError(t, events.Encode(&metav1.WatchEvent{Type: n.Name, Object: runtime.RawExtension{Raw: raw}}))
	}

	return stream.Bytes()
}

// readAll reads the events of stream, in mediaType, as the Nodes informer does (through the serializer that
// trims Nodes), until it fails; it returns the events read and the error that ended them.
func readAll(stream []byte, mediaType string) ([]watch.EventType, error) {
	serializer := trimmingNodes{rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()}

	events, err := newStreamEvents(io.NopCloser(bytes.NewReader(stream)), serializer, mediaType)
	if err != nil {
		return nil, err
	}

	defer events.close()

	var types []watch.EventType

	for {
		typ, _, err := events.next()
		if err != nil {
			return types, err
		}

		types = append(types, typ)
	}
}

// A watch stream decodes, in protobuf and in JSON, to its events, then io.EOF at its end.
func TestStreamEvents(t *testing.T) {
	t.Parallel()

	nodes := []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: string(watch.Added), ResourceVersion: "1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: string(watch.Bookmark), ResourceVersion: "2"}},
	}

	for _, mediaType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		types, err := readAll(watchStreamOf(t, mediaType, nodes...), mediaType)
		require.ErrorIs(t, err, io.EOF, mediaType)
		require.Equal(t, []watch.EventType{watch.Added, watch.Bookmark}, types, mediaType)
	}
}

// Whatever the apiserver (or a proxy) sends, the informer's decoding of its watch stream fails or succeeds,
// and never panics nor hangs.
func FuzzStreamEvents(f *testing.F) {
	for _, mediaType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		stream := watchStreamOf(f, mediaType,
			&corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: string(watch.Modified), ResourceVersion: "3", Labels: map[string]string{"a": "b"}},
				Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}},
			},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(watch.Deleted), ResourceVersion: "4"}})

		f.Add(mediaType == runtime.ContentTypeJSON, stream)
		f.Add(mediaType == runtime.ContentTypeJSON, stream[:len(stream)/2])
	}

	f.Fuzz(func(_ *testing.T, json bool, stream []byte) {
		mediaType := runtime.ContentTypeProtobuf
		if json {
			mediaType = runtime.ContentTypeJSON
		}

		// readAll returns once the stream fails to decode or ends: what matters is that it returns.
		_, _ = readAll(stream, mediaType)
	})
}

// clientGoEvents reads a protobuf watch stream as client-go's watch decoder does (the envelope through the
// raw protobuf serializer, then its object): what protobufEvents replaces.
func clientGoEvents(stream []byte) eventReader { //nolint:ireturn
	serializer := trimmingNodes{rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()}

	objects, envelopes, framer, err := runtime.NewClientNegotiator(serializer, schema.GroupVersion{}).StreamDecoder(runtime.ContentTypeProtobuf, nil)
	if err != nil {
		panic(err)
	}

	body := io.NopCloser(bytes.NewReader(stream))

	return streamEvents{restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(body), envelopes), objects)}
}

// decodedEvent is an event as a reader returned it.
type decodedEvent struct {
	typ watch.EventType
	obj runtime.Object
}

// drain reads events until the first error, which it returns with the events before it.
func drain(events eventReader) ([]decodedEvent, error) {
	defer events.close()

	var out []decodedEvent

	for range 1000 {
		typ, obj, err := events.next()
		if err != nil {
			return out, err
		}

		out = append(out, decodedEvent{typ, obj})
	}

	return out, errors.New("more than 1000 events")
}

// errorClass is how the informer's loop tells a watch's end: its normal end, or anything else. A stream cut
// within a frame is io.ErrUnexpectedEOF for both decoders, but gogo's generated decoders also say
// io.ErrUnexpectedEOF for a whole frame whose fields run past its end, which protobufEvents calls a frame
// that does not parse: the loop then lists again rather than watching on from where it was, both of which
// lose nothing.
func errorClass(err error) string {
	if errors.Is(err, io.EOF) {
		return "EOF"
	}

	return "failed"
}

// sameAsClientGo fails unless protobufEvents reads stream as client-go's decoder does: the same events,
// decoded alike, then an end the informer's loop takes alike.
func sameAsClientGo(t *testing.T, stream []byte) {
	t.Helper()

	serializer := trimmingNodes{rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()}

	ours, err := newStreamEvents(io.NopCloser(bytes.NewReader(stream)), serializer, runtime.ContentTypeProtobuf)
	require.NoError(t, err)
	require.IsType(t, &protobufEvents{}, ours)

	want, wantErr := drain(clientGoEvents(stream))
	got, gotErr := drain(ours)

	require.Equal(t, want, got)

	// client-go's decoder reads a frame longer than its buffer in pieces, and takes a stream that ends right
	// after a piece for a normal end; protobufEvents says the stream was cut within the frame.
	if errors.Is(wantErr, io.EOF) && errors.Is(gotErr, io.ErrUnexpectedEOF) && endsWithinFrame(stream) {
		return
	}

	require.Equal(t, errorClass(wantErr), errorClass(gotErr), "client-go: %v; ours: %v", wantErr, gotErr)
}

// endsWithinFrame reports whether a length-delimited stream ends inside a frame (after its length).
func endsWithinFrame(stream []byte) bool {
	for len(stream) >= 4 {
		size := uint64(binary.BigEndian.Uint32(stream[:4]))
		if uint64(len(stream)-4) < size {
			return true
		}

		stream = stream[4+size:]
	}

	return false
}

// The protobuf watch streams decode as client-go decodes them: whole, cut within a frame or its length,
// with an event of no known type, with an object that does not decode.
func TestProtobufEventsAsClientGo(t *testing.T) {
	t.Parallel()

	kubelet := kubeletNode(string(watch.Modified))
	stream := watchStreamOf(t, runtime.ContentTypeProtobuf,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(watch.Added), ResourceVersion: "1"}},
		kubelet,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(watch.Bookmark), ResourceVersion: "9"}})

	badType := watchStreamOf(t, runtime.ContentTypeProtobuf, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "CHANGED"}})

	var badObject bytes.Buffer

	info, _ := runtime.SerializerInfoForMediaType(Codecs.SupportedMediaTypes(), runtime.ContentTypeProtobuf)
	require.NoError(t, streaming.NewEncoder(info.StreamSerializer.NewFrameWriter(&badObject), info.StreamSerializer.Serializer).
		Encode(&metav1.WatchEvent{Type: string(watch.Added), Object: runtime.RawExtension{Raw: []byte("k8s\x00garbage")}}))

	for name, s := range map[string][]byte{
		"whole": stream, "cut within a frame": stream[:len(stream)-3], "cut within a length": stream[:2],
		"nothing": nil, "unknown type": badType, "object that does not decode": badObject.Bytes(),
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()

			sameAsClientGo(t, s)
		})
	}

	// A stream cut within a frame is a broken connection, which the loop watches on from: no event lost.
	serializer := trimmingNodes{rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()}
	cut, err := newStreamEvents(io.NopCloser(bytes.NewReader(stream[:len(stream)-3])), serializer, runtime.ContentTypeProtobuf)
	require.NoError(t, err)

	_, err = drain(cut)
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

// Whatever the apiserver (or a proxy) sends, protobufEvents reads it as client-go's decoder does.
func FuzzProtobufEventsAsClientGo(f *testing.F) {
	stream := watchStreamOf(f, runtime.ContentTypeProtobuf,
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(watch.Modified), ResourceVersion: "3", Labels: map[string]string{"a": "b"}}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: string(watch.Deleted), ResourceVersion: "4"}})

	f.Add(stream)
	f.Add(stream[:len(stream)/2])
	f.Add(stream[:5])

	f.Fuzz(sameAsClientGo)
}

// A watch event of a Node as a kubelet posts it costs the size of its object less to decode than through
// client-go's decoder, which copies the object out of the frame first. Both are measured in the same run.
func TestProtobufEventsDoNotCopyObjects(t *testing.T) {
	node := kubeletNode(string(watch.Modified))
	stream := watchStreamOf(t, runtime.ContentTypeProtobuf, node)
	object := encodeProtobuf(t, node)
	serializer := trimmingNodes{rest.CodecFactoryForGeneratedClient(Scheme, Codecs).WithoutConversion()}

	// One reader each, as an informer keeps one per watch: the stream repeats its one event.
	repeated := bytes.Repeat(stream, 400)
	ours, err := newStreamEvents(io.NopCloser(bytes.NewReader(repeated)), serializer, runtime.ContentTypeProtobuf)
	require.NoError(t, err)

	theirs := clientGoEvents(repeated)

	next := func(events eventReader) func() error {
		return func() error {
			_, _, err := events.next()

			return err
		}
	}

	got, want := allocatedPerCall(t, next(ours)), allocatedPerCall(t, next(theirs))

	t.Logf("object %d bytes; allocated per event: %d bytes here, %d through client-go's decoder", len(object), got, want)
	assert.LessOrEqual(t, got+uint64(len(object)), want)
}

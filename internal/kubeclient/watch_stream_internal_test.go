package kubeclient

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
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

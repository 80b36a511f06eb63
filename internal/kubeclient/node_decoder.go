package kubeclient

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// trimmingNodes is a NegotiatedSerializer whose protobuf decoder trims Nodes and NodeLists before it decodes
// them (see trimNodeEnvelope): the serializer of the Nodes client, whose informer's cache keeps the trimmed
// Node anyway, and whose writers read nothing else of the Nodes their writes return. Other content types, other kinds, and data it cannot walk are decoded as they are.
type trimmingNodes struct {
	runtime.NegotiatedSerializer
}

// SupportedMediaTypes implements runtime.NegotiatedSerializer: the protobuf decoder trims Nodes (the
// stream's own serializer, which decodes the watch events' frames, is left alone: the object in each frame
// goes through the decoder).
func (s trimmingNodes) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := slices.Clone(s.NegotiatedSerializer.SupportedMediaTypes())

	for i := range infos {
		if infos[i].MediaType == runtime.ContentTypeProtobuf {
			infos[i].Serializer = nodeTrimmingSerializer{Serializer: infos[i].Serializer}
		}
	}

	return infos
}

// nodeTrimmingSerializer decodes protobuf Nodes trimmed; everything else as its Serializer does.
type nodeTrimmingSerializer struct {
	runtime.Serializer
}

// Decode implements runtime.Decoder.
func (s nodeTrimmingSerializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) { //nolint:ireturn
	if trimmed, err := trimNodeEnvelope(data); err == nil {
		data = trimmed
	}

	obj, gvk, err := s.Serializer.Decode(data, defaults, into)

	// Every Node, trimmed or not, holds the shared copy of the strings that repeat (see shareNodeStrings).
	switch o := obj.(type) {
	case *corev1.Node:
		shareNodeStrings(o)
	case *corev1.NodeList:
		for i := range o.Items {
			shareNodeStrings(&o.Items[i])
		}
	}

	return obj, gvk, err
}

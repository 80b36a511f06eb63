// Package sharedspec declares resource specs whose copies share the parts of the spec that nobody changes in
// place, where a protobuf spec's copy (CloneVT) has copies of its own of every part. The state stores a copy
// of every resource written: a part that another holder keeps anyway (the Node informer's cache, the table
// of a value that thousands of Nodes have alike) is then held once instead of once more per Node.
//
// Whoever changes such a part sets a new one: the writers of these resources make a new spec for every
// change, and readers never change what they read.
package sharedspec

import (
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
)

// Sharing says which parts of a spec its copies share.
type Sharing[S any] interface {
	// Share makes dst, a copy of src of its own, hold src's parts that nobody changes in place, or their
	// shared copies; dst is src itself for a spec just decoded (from the state's database, say), whose
	// parts are its own.
	Share(dst, src S)
}

// Message is a protobuf spec (a pointer to T) with the copy vtprotobuf generates.
type Message[T any, S any] interface {
	protobuf.Spec[T]
	CloneVT() S
}

// Spec wraps the protobuf spec S as protobuf.ResourceSpec does; its copies share what H says.
type Spec[T any, S Message[T, S], H Sharing[S]] struct {
	protobuf.ResourceSpec[T, S]
}

// New returns a Spec of value.
func New[T any, S Message[T, S], H Sharing[S]](value S) Spec[T, S, H] {
	return Spec[T, S, H]{protobuf.NewResourceSpec(value)}
}

// DeepCopy implements typed.DeepCopyable: a copy of the spec that shares what H says.
func (spec Spec[T, S, H]) DeepCopy() Spec[T, S, H] {
	if spec.Value == nil {
		return spec
	}

	var sharing H

	clone := spec.Value.CloneVT()
	sharing.Share(clone, spec.Value)

	return New[T, S, H](clone)
}

// Equal implements the spec equality resource.Equal asks for: the wrapped ResourceSpec's would take a Spec
// for another type, and every write of an unchanged resource for a change.
func (spec *Spec[T, S, H]) Equal(other any) bool {
	o, ok := other.(*Spec[T, S, H])

	return ok && protobuf.ProtoEqual(spec.Value, o.Value)
}

// UnmarshalProto implements protobuf.ProtoUnmarshaler: the spec decoded holds the shared copies H says.
func (spec *Spec[T, S, H]) UnmarshalProto(protoBytes []byte) error {
	if err := spec.ResourceSpec.UnmarshalProto(protoBytes); err != nil {
		return err //nolint:wrapcheck // The wrapped spec's own error.
	}

	var sharing H

	sharing.Share(spec.Value, spec.Value)

	return nil
}

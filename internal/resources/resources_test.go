package resources_test

import (
	"strings"
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/resource/protobuf"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
	"github.com/cosi-project/runtime/pkg/state/impl/store"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v4"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/talos-ccm/talos-ccm/internal/resources"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

func TestRegister(t *testing.T) {
	t.Parallel()

	st := state.WrapCore(namespaced.NewState(inmem.Build))

	require.NoError(t, resources.Register(t.Context(), st))

	for _, r := range resources.All() {
		rd := r.ResourceDefinition()

		require.True(t, strings.HasSuffix(rd.Type, ".tccm.dev"), rd.Type)

		got, err := st.Get(t.Context(), resource.NewMetadata(meta.NamespaceName, meta.ResourceDefinitionType, strings.ToLower(rd.Type), resource.VersionUndefined))
		require.NoError(t, err, rd.Type)
		require.NotEmpty(t, got.(*meta.ResourceDefinition).TypedSpec().PrintColumns, rd.Type)
	}
}

func TestProtobufRoundTrip(t *testing.T) {
	t.Parallel()

	for _, r := range resources.All() {
		rd := r.ResourceDefinition()

		_, err := protobuf.CreateResource(rd.Type)
		require.NoError(t, err, rd.Type)
	}

	require.Equal(t, node.NodeTransformType, node.NewNodeTransform(node.NamespaceName, "a").Metadata().Type())

	nt := node.NewNodeTransform(node.NamespaceName, "worker-1")
	nt.TypedSpec().Value.ProviderId = "aws:///eu-west-1a/i-0123"
	nt.TypedSpec().Value.Labels = map[string]string{"topology.kubernetes.io/zone": "eu-west-1a"}

	b, err := store.ProtobufMarshaler{}.MarshalResource(nt)
	require.NoError(t, err)

	back, err := store.ProtobufMarshaler{}.UnmarshalResource(b)
	require.NoError(t, err)
	require.True(t, resource.Equal(nt, back))
}

func TestYAMLNames(t *testing.T) {
	t.Parallel()

	nt := node.NewNodeTransform(node.NamespaceName, "worker-1")
	nt.TypedSpec().Value.ProviderId = "talos://metal/10.0.0.1"
	nt.TypedSpec().Value.MatchedRules = []string{"web"}

	out, err := yaml.Marshal(nt.Spec())
	require.NoError(t, err)
	require.Contains(t, string(out), "providerID: talos://metal/10.0.0.1")
	require.Contains(t, string(out), "matchedRules:")

	back := node.NewNodeTransform(node.NamespaceName, "worker-1")
	require.NoError(t, yaml.Unmarshal(out, back.Spec()))
	require.Equal(t, "talos://metal/10.0.0.1", back.TypedSpec().Value.ProviderId)
}

// filled returns msg with every scalar field set (and every message and list field given one element),
// so that each field's name shows in its YAML.
func filled(msg protoreflect.Message, depth int) {
	fields := msg.Descriptor().Fields()

	for i := range fields.Len() {
		fd := fields.Get(i)

		switch {
		case fd.IsMap():
			m := msg.Mutable(fd).Map()
			key := scalar(fd.MapKey())

			if fd.MapValue().Kind() == protoreflect.MessageKind {
				if depth > 0 {
					v := m.NewValue()
					filled(v.Message(), depth-1)
					m.Set(key.MapKey(), v)
				}

				continue
			}

			m.Set(key.MapKey(), scalar(fd.MapValue()))
		case fd.IsList():
			l := msg.Mutable(fd).List()

			if fd.Kind() == protoreflect.MessageKind {
				if depth > 0 {
					v := l.NewElement()
					filled(v.Message(), depth-1)
					l.Append(v)
				}

				continue
			}

			l.Append(scalar(fd))
		case fd.Kind() == protoreflect.MessageKind:
			if depth > 0 {
				filled(msg.Mutable(fd).Message(), depth-1)
			}
		default:
			msg.Set(fd, scalar(fd))
		}
	}
}

// scalar returns a non-zero value of the field's kind.
func scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(true)
	case protoreflect.StringKind:
		return protoreflect.ValueOfString("x-" + string(fd.Name()))
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte("x"))
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(7)
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(7)
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(7)
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(7)
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(0.5)
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(0.5)
	case protoreflect.EnumKind:
		return protoreflect.ValueOfEnum(fd.Enum().Values().Get(fd.Enum().Values().Len() - 1).Number())
	default:
		panic("unexpected kind " + fd.Kind().String())
	}
}

// TestYAMLOfEveryType renders the spec of every registered type, with every field set, to YAML and back:
// each top-level field shows under its protobuf JSON name (the generated YAML methods are in place), and
// nothing is lost.
func TestYAMLOfEveryType(t *testing.T) {
	t.Parallel()

	for _, r := range resources.All() {
		rd := r.ResourceDefinition()

		t.Run(rd.Type, func(t *testing.T) {
			t.Parallel()

			res, err := protobuf.CreateResource(rd.Type)
			require.NoError(t, err)

			spec, ok := res.Spec().(interface{ GetValue() proto.Message })
			require.True(t, ok, "%T has no protobuf spec", res.Spec())

			msg := spec.GetValue().ProtoReflect().New().Interface()
			_, ok = msg.(yaml.Marshaler)
			require.True(t, ok, "%T has no YAML methods: run go run ./hack/yamlmethods", msg)

			filled(msg.ProtoReflect(), 2)

			out, err := yaml.Marshal(msg)
			require.NoError(t, err)

			fields := msg.ProtoReflect().Descriptor().Fields()
			for i := range fields.Len() {
				require.Contains(t, "\n"+string(out), "\n"+fields.Get(i).JSONName()+":", "field %s of %s", fields.Get(i).Name(), rd.Type)
			}

			back := msg.ProtoReflect().New().Interface()
			require.NoError(t, yaml.Unmarshal(out, back))
			require.True(t, proto.Equal(msg, back), "%s does not survive YAML:\n%s", rd.Type, out)
		})
	}
}

// TestCopyOfEveryType checks that the spec of every registered type has the generated CloneVT and EqualVT
// methods, which the COSI runtime uses instead of protobuf's reflection at every read (a copy) and write (a
// comparison), and that they copy and compare every field: a copy with every field set is equal, shares
// nothing with the original, and is no longer equal once a field of the original changes.
func TestCopyOfEveryType(t *testing.T) {
	t.Parallel()

	type vtMessage interface {
		proto.Message
		EqualMessageVT(proto.Message) bool
		CloneMessageVT() proto.Message
	}

	for _, r := range resources.All() {
		rd := r.ResourceDefinition()

		t.Run(rd.Type, func(t *testing.T) {
			t.Parallel()

			res, err := protobuf.CreateResource(rd.Type)
			require.NoError(t, err)

			spec, ok := res.Spec().(interface{ GetValue() proto.Message })
			require.True(t, ok, "%T has no protobuf spec", res.Spec())

			msg, ok := spec.GetValue().ProtoReflect().New().Interface().(vtMessage)
			require.True(t, ok, "%T has no CloneVT and EqualVT methods: run make generate", spec.GetValue())

			filled(msg.ProtoReflect(), 2)

			clone, ok := msg.CloneMessageVT().(vtMessage)
			require.True(t, ok)
			require.True(t, proto.Equal(msg, clone), "%s: the copy differs", rd.Type)
			require.True(t, msg.EqualMessageVT(clone), "%s: EqualVT says the copy differs", rd.Type)

			// The original's maps and lists changed in place: the copy keeps its values, and no longer
			// equals the original.
			snapshot := proto.Clone(clone)
			changeInPlace(msg.ProtoReflect())

			require.True(t, proto.Equal(snapshot, clone), "%s: the copy shares the original's maps or lists", rd.Type)
			require.False(t, msg.EqualMessageVT(clone), "%s: EqualVT sees no change", rd.Type)
		})
	}
}

// changeInPlace changes the elements of msg's maps and lists (and of its messages' maps and lists) without
// replacing the maps and lists themselves, and clears its other fields.
func changeInPlace(msg protoreflect.Message) {
	fields := msg.Descriptor().Fields()

	for i := range fields.Len() {
		fd := fields.Get(i)

		switch {
		case fd.IsMap():
			m := msg.Mutable(fd).Map()
			m.Range(func(k protoreflect.MapKey, v protoreflect.Value) bool {
				if fd.MapValue().Kind() == protoreflect.MessageKind {
					changeInPlace(v.Message())
				} else {
					m.Set(k, protoreflect.ValueOfString("changed"))
				}

				return true
			})
		case fd.IsList():
			l := msg.Mutable(fd).List()
			for j := range l.Len() {
				switch fd.Kind() { //nolint:exhaustive // the other kinds have no values of their own to share
				case protoreflect.MessageKind:
					changeInPlace(l.Get(j).Message())
				case protoreflect.StringKind:
					l.Set(j, protoreflect.ValueOfString("changed"))
				case protoreflect.BytesKind:
					l.Get(j).Bytes()[0] = '!' // in place: a copy must have bytes of its own
				}
			}
		case fd.Kind() == protoreflect.MessageKind:
			changeInPlace(msg.Mutable(fd).Message())
		default:
			msg.Clear(fd)
		}
	}
}

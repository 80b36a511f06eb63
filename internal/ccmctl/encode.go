package ccmctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"go.yaml.in/yaml/v4"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// document is the YAML and JSON form of a resource; Event is set in watch mode.
type document struct {
	Event    string             `yaml:"event,omitempty"`
	Metadata *resource.Metadata `yaml:"metadata"`
	Spec     any                `yaml:"spec"`
}

// yamlNode renders a resource as a YAML node: metadata, then the spec with the names the specs declare
// for YAML (lower camel case).
func yamlNode(event string, r resource.Resource) (*yaml.Node, error) {
	b, err := yaml.Marshal(&document{Event: event, Metadata: r.Metadata(), Spec: shownSpec(r)})
	if err != nil {
		return nil, fmt.Errorf("failed to marshal %s %s: %w", r.Metadata().Type(), r.Metadata().ID(), err)
	}

	var node yaml.Node

	if err = yaml.Unmarshal(b, &node); err != nil {
		return nil, fmt.Errorf("failed to decode %s %s: %w", r.Metadata().Type(), r.Metadata().ID(), err)
	}

	return node.Content[0], nil
}

// YAMLWriter writes resources as a stream of YAML documents.
type YAMLWriter struct {
	w       io.Writer
	written bool
}

// NewYAMLWriter returns a writer of YAML documents to w.
func NewYAMLWriter(w io.Writer) *YAMLWriter { return &YAMLWriter{w: w} }

// Write writes one resource; event is empty outside watch mode.
func (y *YAMLWriter) Write(event string, r resource.Resource) error {
	node, err := yamlNode(event, r)
	if err != nil {
		return err
	}

	var buf bytes.Buffer

	if y.written {
		buf.WriteString("---\n")
	}

	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)

	if err = enc.Encode(node); err != nil {
		return fmt.Errorf("failed to encode YAML: %w", err)
	}

	if err = enc.Close(); err != nil {
		return fmt.Errorf("failed to encode YAML: %w", err)
	}

	y.written = true

	if _, err = y.w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	return nil
}

// shownSpec is the spec as every output shows it. A ResourceDefinition's alias lists repeat names (COSI
// adds the singular name and the initials, which definitions often declare already): each is shown once,
// where it first appears.
func shownSpec(r resource.Resource) any {
	rd, ok := r.(*meta.ResourceDefinition)
	if !ok {
		return r.Spec()
	}

	spec := rd.TypedSpec().DeepCopy()
	spec.Aliases = unique(spec.Aliases)
	spec.AllAliases = unique(spec.AllAliases)

	return &spec
}

// unique keeps the first of equal strings, in order.
func unique[S ~[]E, E ~string](list S) S {
	seen := make(map[E]bool, len(list))

	return slices.DeleteFunc(slices.Clone(list), func(s E) bool {
		if seen[s] {
			return true
		}

		seen[s] = true

		return false
	})
}

// documentJSON is a resource in its JSON form, compact.
func documentJSON(event string, r resource.Resource) ([]byte, error) {
	node, err := yamlNode(event, r)
	if err != nil {
		return nil, err
	}

	var compact bytes.Buffer

	if err = writeJSON(&compact, node); err != nil {
		return nil, err
	}

	return compact.Bytes(), nil
}

// JSONWriter writes resources as a stream of indented JSON objects, one per resource, with the same
// fields in the same order as the YAML output.
type JSONWriter struct {
	w io.Writer
}

// NewJSONWriter returns a writer of JSON objects to w.
func NewJSONWriter(w io.Writer) *JSONWriter { return &JSONWriter{w: w} }

// Write writes one resource; event is empty outside watch mode.
func (j *JSONWriter) Write(event string, r resource.Resource) error {
	compact, err := documentJSON(event, r)
	if err != nil {
		return err
	}

	var out bytes.Buffer

	if err = json.Indent(&out, compact, "", "  "); err != nil {
		return fmt.Errorf("failed to indent JSON: %w", err)
	}

	out.WriteByte('\n')

	if _, err = j.w.Write(out.Bytes()); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	return nil
}

// writeJSON encodes a YAML node as JSON, keeping the order of mapping keys.
func writeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			buf.WriteString("null")

			return nil
		}

		return writeJSON(buf, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')

		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}

			key, err := json.Marshal(n.Content[i].Value)
			if err != nil {
				return fmt.Errorf("failed to encode JSON key: %w", err)
			}

			buf.Write(key)
			buf.WriteByte(':')

			if err = writeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}

		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')

		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}

			if err := writeJSON(buf, c); err != nil {
				return err
			}
		}

		buf.WriteByte(']')
	default:
		var v any

		if err := n.Decode(&v); err != nil {
			return fmt.Errorf("failed to decode YAML value %q: %w", n.Value, err)
		}

		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("failed to encode JSON value %q: %w", n.Value, err)
		}

		buf.Write(b)
	}

	return nil
}

// specValue is the spec as print column JSONPaths see it: the YAML form decoded into maps and slices.
// Protobuf specs are rendered with their unset fields too (false, empty), so that a column shows
// "false" rather than nothing; the names are the same as in the YAML form.
func specValue(r resource.Resource) (any, error) {
	var (
		b   []byte
		err error
	)

	if m, ok := protoMessage(r.Spec()); ok {
		b, err = protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(m)
	} else {
		b, err = yaml.Marshal(shownSpec(r))
	}

	if err != nil {
		return nil, fmt.Errorf("failed to marshal spec of %s %s: %w", r.Metadata().Type(), r.Metadata().ID(), err)
	}

	var v any

	// JSON is YAML, so one decoder reads both.
	if err = yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("failed to decode spec of %s %s: %w", r.Metadata().Type(), r.Metadata().ID(), err)
	}

	return v, nil
}

// protoMessage returns the protobuf message that a typed resource's spec wraps (the Value field of
// protobuf.ResourceSpec, whose type parameter a type assertion cannot name).
func protoMessage(spec any) (proto.Message, bool) {
	v := reflect.ValueOf(spec)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}

	field := v.Elem().FieldByName("Value")
	if !field.IsValid() || !field.CanInterface() {
		return nil, false
	}

	m, ok := field.Interface().(proto.Message)
	if !ok || reflect.ValueOf(m).IsNil() {
		return nil, false
	}

	return m, true
}

package specs

import (
	"fmt"

	"go.yaml.in/yaml/v4"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// Specs render to YAML with their protobuf JSON names (lower camel case, as declared with json_name in
// api/proto), not with Go's lowercased field names, so that `ccmctl get -o yaml` and print column
// JSONPaths use the same names as the documentation.

func marshalYAML(m proto.Message) (any, error) {
	b, err := protojson.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("failed to marshal spec: %w", err)
	}

	// JSON is YAML: decoding it into a node keeps the field order of the message.
	var node yaml.Node

	if err = yaml.Unmarshal(b, &node); err != nil {
		return nil, fmt.Errorf("failed to convert spec to YAML: %w", err)
	}

	if len(node.Content) == 0 {
		return map[string]any{}, nil
	}

	blockStyle(node.Content[0])

	return node.Content[0], nil
}

// blockStyle turns the flow style that JSON input leaves on nodes into YAML's usual block style.
func blockStyle(n *yaml.Node) {
	n.Style &^= yaml.FlowStyle | yaml.DoubleQuotedStyle

	for _, c := range n.Content {
		blockStyle(c)
	}
}

func unmarshalYAML(node *yaml.Node, m proto.Message) error {
	var generic any

	if err := node.Decode(&generic); err != nil {
		return fmt.Errorf("failed to decode spec YAML: %w", err)
	}

	b, err := yamlToJSON(generic)
	if err != nil {
		return err
	}

	if err = (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(b, m); err != nil {
		return fmt.Errorf("failed to unmarshal spec: %w", err)
	}

	return nil
}

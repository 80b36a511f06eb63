package specs

import (
	"encoding/json"
	"fmt"
)

// yamlToJSON encodes a value decoded from YAML as JSON; YAML maps may have non-string keys, which JSON
// objects cannot, so they are rendered with fmt.
func yamlToJSON(v any) ([]byte, error) {
	b, err := json.Marshal(jsonCompatible(v))
	if err != nil {
		return nil, fmt.Errorf("failed to encode spec as JSON: %w", err)
	}

	return b, nil
}

func jsonCompatible(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[k] = jsonCompatible(val)
		}

		return out
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			out[fmt.Sprint(k)] = jsonCompatible(val)
		}

		return out
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			out[i] = jsonCompatible(val)
		}

		return out
	default:
		return v
	}
}

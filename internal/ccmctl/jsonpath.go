package ccmctl

import (
	"bytes"
	"fmt"
	"io"

	"github.com/cosi-project/runtime/pkg/resource"
	"go.yaml.in/yaml/v4"
	"k8s.io/client-go/util/jsonpath"
)

// JSONPathWriter writes resources through a JSONPath template in kubectl's syntax, applied to the object
// that -o json prints: to each resource as it is written, or, for a list, once on Flush to an object whose
// items are the resources ({"kind": "List", "items": [...]}, as kubectl's). Missing keys print nothing, as
// in kubectl, and nothing is added to what the template prints (no newline: end it with {"\n"}).
type JSONPathWriter struct {
	w     io.Writer
	path  *jsonpath.JSONPath
	items []any
	list  bool
}

// NewJSONPathWriter parses template; list gathers the resources into one list object.
func NewJSONPathWriter(w io.Writer, template string, list bool) (*JSONPathWriter, error) {
	path := jsonpath.New("output").AllowMissingKeys(true)

	if err := path.Parse(template); err != nil {
		return nil, fmt.Errorf("failed to parse jsonpath template %q: %w", template, err)
	}

	return &JSONPathWriter{w: w, path: path, list: list}, nil
}

// Write applies the template to one resource, or keeps it for the list; event is empty outside watch
// mode.
func (j *JSONPathWriter) Write(event string, r resource.Resource) error {
	b, err := documentJSON(event, r)
	if err != nil {
		return err
	}

	var doc any

	// JSON is YAML: decoded by YAML, integers stay integers (a version prints as 3, not 3e+00).
	if err = yaml.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("failed to decode %s %s: %w", r.Metadata().Type(), r.Metadata().ID(), err)
	}

	if j.list {
		j.items = append(j.items, doc)

		return nil
	}

	return j.execute(doc)
}

// Flush applies the template to the list, when the writer gathers one.
func (j *JSONPathWriter) Flush() error {
	if !j.list {
		return nil
	}

	items := j.items
	if items == nil {
		items = []any{}
	}

	j.items = nil

	return j.execute(map[string]any{"kind": "List", "items": items})
}

func (j *JSONPathWriter) execute(data any) error {
	var buf bytes.Buffer

	if err := j.path.Execute(&buf, data); err != nil {
		return fmt.Errorf("failed to execute jsonpath template: %w", err)
	}

	if _, err := j.w.Write(buf.Bytes()); err != nil {
		return fmt.Errorf("failed to write output: %w", err)
	}

	return nil
}

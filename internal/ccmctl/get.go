package ccmctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"
)

// Output formats of get.
const (
	OutputTable = "table"
	OutputYAML  = "yaml"
	OutputJSON  = "json"
	// OutputJSONPath is the prefix of -o jsonpath=TEMPLATE.
	OutputJSONPath = "jsonpath="
)

// Event names of get --watch.
const (
	EventCreated   = "created"
	EventUpdated   = "updated"
	EventDestroyed = "destroyed"
)

// GetOptions are the arguments of get.
type GetOptions struct {
	// Type is a type, or any of its aliases.
	Type string
	// Namespace overrides the type's default namespace.
	Namespace string
	// Output is OutputTable, OutputYAML, OutputJSON or OutputJSONPath followed by a template.
	Output string
	// IDs select resources; none means all of the type.
	IDs []string
	// Labels selects resources by their labels (see ParseSelector); no terms select all.
	Labels resource.LabelQuery
	// Watch streams changes after the current resources, until ctx is done.
	Watch bool
}

// NotFoundError is returned for an ID that does not exist.
type NotFoundError struct {
	Type      string
	ID        string
	Namespace string
}

// Error implements error.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("%s %q not found in namespace %q", e.Type, e.ID, e.Namespace)
}

// writer writes resources in one output format.
type writer interface {
	Write(event string, r resource.Resource) error
}

// flusher is a writer that buffers (the table).
type flusher interface {
	Flush() error
}

// Get writes the resources that opts select to out.
func Get(ctx context.Context, st state.State, opts GetOptions, out io.Writer) error {
	rd, err := resolve(ctx, st, opts.Type)
	if err != nil {
		return err
	}

	spec := rd.TypedSpec()

	ns := opts.Namespace
	if ns == "" {
		ns = spec.DefaultNamespace
	}

	w, err := newWriter(out, spec, opts)
	if err != nil {
		return err
	}

	kind := resource.NewMetadata(ns, spec.Type, "", resource.VersionUndefined)

	if opts.Watch {
		return watch(ctx, st, kind, newSelection(opts.IDs, opts.Labels), w)
	}

	var (
		items   []resource.Resource
		missing []error
	)

	if len(opts.IDs) == 0 {
		var listOpts []state.ListOption

		// The state filters by labels, and so does ccmctl, for a state that ignores the query.
		if len(opts.Labels.Terms) > 0 {
			listOpts = append(listOpts, state.WithLabelQuery(resource.RawLabelQuery(opts.Labels)))
		}

		list, listErr := st.List(ctx, kind, listOpts...)
		if listErr != nil {
			return fmt.Errorf("failed to list %s: %w", spec.Type, listErr)
		}

		items = list.Items
	}

	for _, id := range opts.IDs {
		r, getErr := st.Get(ctx, resource.NewMetadata(ns, spec.Type, id, resource.VersionUndefined))

		switch {
		case state.IsNotFoundError(getErr):
			missing = append(missing, &NotFoundError{Type: displayType(spec), ID: id, Namespace: ns})
		case getErr != nil:
			return fmt.Errorf("failed to get %s %q: %w", spec.Type, id, getErr)
		default:
			items = append(items, r)
		}
	}

	for _, r := range items {
		if !opts.Labels.Matches(*r.Metadata().Labels()) {
			continue
		}

		if err = w.Write("", r); err != nil {
			return err
		}
	}

	if err = flush(w); err != nil {
		return err
	}

	return errors.Join(missing...)
}

func newWriter(out io.Writer, spec *meta.ResourceDefinitionSpec, opts GetOptions) (writer, error) {
	if template, ok := strings.CutPrefix(opts.Output, OutputJSONPath); ok {
		// As kubectl does, one resource asked for by its ID is the template's object; otherwise the
		// template sees a list with the resources as items.
		return NewJSONPathWriter(out, template, !opts.Watch && len(opts.IDs) != 1)
	}

	switch opts.Output {
	case OutputTable, "":
		return NewTable(out, spec, opts.Watch)
	case OutputYAML:
		return NewYAMLWriter(out), nil
	case OutputJSON:
		return NewJSONWriter(out), nil
	default:
		return nil, fmt.Errorf("unknown output format %q (want table, yaml, json or jsonpath=TEMPLATE)", opts.Output)
	}
}

// flush writes what a buffering writer holds.
func flush(w writer) error {
	if f, ok := w.(flusher); ok {
		return f.Flush()
	}

	return nil
}

// watch writes the current resources of kind as created, then every change, until ctx is done; sel picks
// the events shown.
func watch(ctx context.Context, st state.State, kind resource.Kind, sel *selection, w writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	events := make(chan state.Event)

	watchOpts := []state.WatchKindOption{state.WithBootstrapContents(true)}
	if len(sel.query.Terms) > 0 {
		watchOpts = append(watchOpts, state.WatchWithLabelQuery(resource.RawLabelQuery(sel.query)))
	}

	err := st.WatchKind(ctx, kind, events, watchOpts...)
	if err != nil {
		return fmt.Errorf("failed to watch %s: %w", kind.Type(), err)
	}

	bootstrapped := false

	for {
		var ev state.Event

		select {
		case <-ctx.Done():
			return nil
		case ev = <-events:
		}

		switch ev.Type {
		case state.Bootstrapped:
			// The current resources are all written: align them as one table.
			bootstrapped = true

			if err = flush(w); err != nil {
				return err
			}

			continue
		case state.Errored:
			if ctx.Err() != nil {
				return nil
			}

			return fmt.Errorf("watch of %s failed: %w", kind.Type(), ev.Error)
		case state.Noop:
			continue
		case state.Created, state.Updated, state.Destroyed:
		}

		name, show := sel.event(ev)
		if !show {
			continue
		}

		if err = w.Write(name, ev.Resource); err != nil {
			return err
		}

		if bootstrapped {
			if err = flush(w); err != nil {
				return err
			}
		}
	}
}

func displayType(spec *meta.ResourceDefinitionSpec) string {
	if spec.DisplayType != "" {
		return spec.DisplayType
	}

	return spec.Type
}

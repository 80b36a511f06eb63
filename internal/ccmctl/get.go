package ccmctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/state"
)

// Output formats of get.
const (
	OutputTable = "table"
	OutputYAML  = "yaml"
	OutputJSON  = "json"
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
	// Output is OutputTable, OutputYAML or OutputJSON.
	Output string
	// IDs select resources; none means all of the type.
	IDs []string
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
		return watch(ctx, st, kind, opts.IDs, w)
	}

	var (
		items   []resource.Resource
		missing []error
	)

	if len(opts.IDs) == 0 {
		list, listErr := st.List(ctx, kind)
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
		if err = w.Write("", r); err != nil {
			return err
		}
	}

	if f, ok := w.(flusher); ok {
		if err = f.Flush(); err != nil {
			return err
		}
	}

	return errors.Join(missing...)
}

func newWriter(out io.Writer, spec *meta.ResourceDefinitionSpec, opts GetOptions) (writer, error) {
	switch opts.Output {
	case OutputTable, "":
		return NewTable(out, spec, opts.Watch)
	case OutputYAML:
		return NewYAMLWriter(out), nil
	case OutputJSON:
		return NewJSONWriter(out), nil
	default:
		return nil, fmt.Errorf("unknown output format %q (want table, yaml or json)", opts.Output)
	}
}

// watch writes the current resources of kind as created, then every change, until ctx is done. With ids,
// only those resources are shown.
func watch(ctx context.Context, st state.State, kind resource.Kind, ids []string, w writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	events := make(chan state.Event)

	if err := st.WatchKind(ctx, kind, events, state.WithBootstrapContents(true)); err != nil {
		return fmt.Errorf("failed to watch %s: %w", kind.Type(), err)
	}

	bootstrapped := false

	flush := func() error {
		if f, ok := w.(flusher); ok {
			return f.Flush()
		}

		return nil
	}

	for {
		var ev state.Event

		select {
		case <-ctx.Done():
			return nil
		case ev = <-events:
		}

		var name string

		switch ev.Type {
		case state.Created:
			name = EventCreated
		case state.Updated:
			name = EventUpdated
		case state.Destroyed:
			name = EventDestroyed
		case state.Bootstrapped:
			// The current resources are all written: align them as one table.
			bootstrapped = true

			if err := flush(); err != nil {
				return err
			}

			continue
		case state.Errored:
			if ctx.Err() != nil {
				return nil
			}

			return fmt.Errorf("watch of %s failed: %w", kind.Type(), ev.Error)
		default:
			continue
		}

		if len(ids) > 0 && !slices.Contains(ids, ev.Resource.Metadata().ID()) {
			continue
		}

		if err := w.Write(name, ev.Resource); err != nil {
			return err
		}

		if bootstrapped {
			if err := flush(); err != nil {
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

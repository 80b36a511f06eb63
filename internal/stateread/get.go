package stateread

import (
	"context"
	"fmt"
	"sync"

	"github.com/cosi-project/runtime/pkg/controller/generic"
	"github.com/cosi-project/runtime/pkg/resource"
)

// Get reads the resource of type R with the ID id in R's default namespace, as safe.ReaderGetByID does, for
// less: the hot paths read a Node's resources several times per pass, and safe.ReaderGetByID builds R's
// resource definition twice for each read (its aliases and print columns are new slices every time) and a
// whole resource.Metadata (its clocks read) to point at the resource.
func Get[R generic.ResourceWithRD](ctx context.Context, g Getter, id resource.ID) (R, error) {
	var zero R

	ptr := pointerTo[R](id)

	res, err := g.Get(ctx, ptr)
	if err != nil {
		return zero, err //nolint:wrapcheck // As safe.ReaderGetByID: the caller tells a missing resource by the state's error.
	}

	typed, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("failed to read %s %q: the state holds a %T", ptr.typ, id, res)
	}

	return typed, nil
}

// pointerTo points at the resource of type R with the ID id in R's default namespace.
func pointerTo[R generic.ResourceWithRD](id resource.ID) *pointer {
	return &pointer{kind: kindOf[R](), id: id}
}

// kind is the default namespace and the type of a resource type.
type kind struct {
	ns  resource.Namespace
	typ resource.Type
}

// kinds holds the kind of every resource type read, by the type's zero value (a nil pointer: an interface
// of it holds no allocation).
var kinds sync.Map

// kindOf is R's kind, from its resource definition the first time.
func kindOf[R generic.ResourceWithRD]() kind {
	var zero R

	if k, ok := kinds.Load(any(zero)); ok {
		return k.(kind) //nolint:forcetypeassert // kinds holds only kinds.
	}

	rd := zero.ResourceDefinition()
	k := kind{ns: rd.DefaultNamespace, typ: rd.Type}

	kinds.Store(any(zero), k)

	return k
}

// pointer points at a resource: the resource.Pointer of Get, which needs nothing else of a resource.Metadata.
type pointer struct {
	kind

	id resource.ID
}

// Namespace implements resource.Pointer.
func (p *pointer) Namespace() resource.Namespace { return p.ns }

// Type implements resource.Pointer.
func (p *pointer) Type() resource.Type { return p.typ }

// ID implements resource.Pointer.
func (p *pointer) ID() resource.ID { return p.id }

// String is how a resource.Metadata prints itself, for the errors that name the resource.
func (p *pointer) String() string {
	return fmt.Sprintf("%s(%s/%s@%s)", p.typ, p.ns, p.id, resource.VersionUndefined)
}

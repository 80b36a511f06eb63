package cosistate

import (
	"fmt"

	"github.com/cosi-project/runtime/pkg/resource"
)

// notFoundError is the error of a read of a resource the state does not hold, with inmem.ErrNotFound's message:
// state.IsNotFoundError knows it. The controllers' passes read resources that do not exist on most passes
// (the output before the first decision, a sink's ApplyStatus of a Node without problems, a fact not read
// yet), and inmem.ErrNotFound formats its message at once (a metadata built and printed, about ten
// allocations) for callers that never read it: this one formats it when it is read.
type notFoundError struct {
	ns  resource.Namespace
	typ resource.Type
	id  resource.ID
}

// NotFoundError implements state.ErrNotFound.
func (*notFoundError) NotFoundError() {}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("resource %s doesn't exist", resource.NewMetadata(e.ns, e.typ, e.id, resource.VersionUndefined))
}

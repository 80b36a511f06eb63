package cosistate

import (
	"errors"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
)

// viewError translates an error of the host's state for the view. Not found, owner and phase conflicts,
// pending finalizers and invalid bookmarks keep their kind (state.IsNotFoundError and the others look
// through the wrapper); a conflict also names its resource in the view's namespace, so that
// state.IsConflictError with state.WithResourceNamespace matches the namespace the caller used. The message
// is the host's: it names the namespace as the host stores it.
func (st *prefixedState) viewError(err error) error {
	var conflict state.ErrConflict
	if !errors.As(err, &conflict) {
		return err
	}

	return conflictError{error: err, resource: st.viewPointer(conflict.GetResource())}
}

// viewPointer returns the view's pointer of a pointer of the host's state; a pointer outside of the prefix
// (or none) is kept as it is.
func (st *prefixedState) viewPointer(ptr resource.Pointer) resource.Pointer { //nolint:ireturn
	if ptr == nil {
		return nil
	}

	ns, err := st.viewNamespace(ptr.Namespace())
	if err != nil {
		return ptr
	}

	return resource.NewMetadata(ns, ptr.Type(), ptr.ID(), resource.VersionUndefined)
}

// conflictError is a conflict of the host's state whose resource is in the view's namespace.
type conflictError struct {
	error
	resource resource.Pointer
}

// ConflictError implements state.ErrConflict.
func (conflictError) ConflictError() {}

// GetResource implements state.ErrConflict.
func (e conflictError) GetResource() resource.Pointer { //nolint:ireturn
	return e.resource
}

// Unwrap returns the host's error, so that its other kinds (owner or phase conflict) are found.
func (e conflictError) Unwrap() error {
	return e.error
}

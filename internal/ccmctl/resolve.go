// Package ccmctl implements the ccmctl commands: reading talos-ccm's state over its API, and the offline
// and dry-run checks of config files. Rendering is kept in pure functions, apart from the API calls.
package ccmctl

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource/meta"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/internal/resources"
)

// UnknownTypeError is returned for a name that designates no registered type.
type UnknownTypeError struct {
	Name string
}

// Error implements error.
func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("unknown resource type %q (list the types with \"ccmctl get rd\")", e.Name)
}

// ResolveType returns the definition that name designates: its full type, or any of its aliases
// (singular and plural names, abbreviations, the type with a shortened suffix), compared without case.
// A name that several types answer to is an error that lists them.
func ResolveType(defs []*meta.ResourceDefinition, name string) (*meta.ResourceDefinition, error) {
	var matches []*meta.ResourceDefinition

	for _, rd := range defs {
		if slices.ContainsFunc(names(rd.TypedSpec()), func(n string) bool { return strings.EqualFold(n, name) }) {
			matches = append(matches, rd)
		}
	}

	switch len(matches) {
	case 0:
		return nil, &UnknownTypeError{Name: name}
	case 1:
		return matches[0], nil
	default:
		types := make([]string, len(matches))
		for i, rd := range matches {
			types[i] = rd.TypedSpec().Type
		}

		slices.Sort(types)

		return nil, fmt.Errorf("resource type %q is ambiguous: it names %s", name, strings.Join(types, ", "))
	}
}

// names lists every name a type answers to.
func names(spec *meta.ResourceDefinitionSpec) []string {
	out := []string{spec.Type, spec.ID(), spec.DisplayType}
	out = append(out, spec.Aliases...)

	return append(out, spec.AllAliases...)
}

// ListDefinitions reads the resource definitions that the server registered.
func ListDefinitions(ctx context.Context, st state.State) ([]*meta.ResourceDefinition, error) {
	list, err := safe.StateListAll[*meta.ResourceDefinition](ctx, st)
	if err != nil {
		return nil, fmt.Errorf("failed to list resource definitions: %w", err)
	}

	return slices.Collect(list.All()), nil
}

// BuiltinDefinitions are the definitions of the types this ccmctl was built with: talos-ccm's own and
// COSI's meta types, those a talos-ccm of the same version serves.
func BuiltinDefinitions() ([]*meta.ResourceDefinition, error) {
	providers := []meta.ResourceDefinitionProvider{&meta.ResourceDefinition{}, &meta.Namespace{}}
	for _, r := range resources.All() {
		providers = append(providers, r)
	}

	defs := make([]*meta.ResourceDefinition, 0, len(providers))

	for _, p := range providers {
		rd, err := meta.NewResourceDefinition(p.ResourceDefinition())
		if err != nil {
			return nil, fmt.Errorf("failed to build the definition of %s: %w", p.ResourceDefinition().Type, err)
		}

		defs = append(defs, rd)
	}

	return defs, nil
}

// resolve reads the definitions and resolves name among them.
func resolve(ctx context.Context, st state.State, name string) (*meta.ResourceDefinition, error) {
	defs, err := ListDefinitions(ctx, st)
	if err != nil {
		return nil, err
	}

	return ResolveType(defs, name)
}

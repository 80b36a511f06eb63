package ctest

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
)

// Declaring is what a controller declares to the runtime.
type Declaring interface {
	Name() string
	Inputs() []controller.Input
	Outputs() []controller.Output
}

// Input is an input of the resources of typ in ns, of the given kind.
func Input(ns resource.Namespace, typ resource.Type, kind controller.InputKind) controller.Input {
	return controller.Input{Namespace: ns, Type: typ, Kind: kind}
}

// Output is an exclusive output of the resources of typ.
func Output(typ resource.Type) controller.Output {
	return controller.Output{Type: typ, Kind: controller.OutputExclusive}
}

// AssertDeclares checks a controller's name (the finalizer it keeps and the owner of its outputs,
// persisted), inputs and outputs (the dependency graph ccmctl shows, and the controller's rights on the
// state: a finalizer only on a strong input).
func AssertDeclares(t *testing.T, ctrl Declaring, name string, inputs []controller.Input, outputs []controller.Output) {
	t.Helper()

	assert.Equal(t, name, ctrl.Name())
	assert.Equal(t, inputs, ctrl.Inputs())
	assert.Equal(t, outputs, ctrl.Outputs())
}

package factsv1

import (
	"context"
	"errors"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"

	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// InvalidMachineError is the error of one machine whose facts Sync left as they were: Validate refused it,
// or its Node name was listed more than once.
type InvalidMachineError struct {
	// Err says what is wrong with the machine.
	Err error
	// NodeName is the machine's Node name, as listed.
	NodeName string
	// Index is the machine's position in the list given to Sync.
	Index int
}

// Error implements error.
func (e *InvalidMachineError) Error() string {
	return fmt.Sprintf("machines[%d] (Node %s): %v", e.Index, quote(e.NodeName), e.Err)
}

// Unwrap returns what is wrong with the machine.
func (e *InvalidMachineError) Unwrap() error { return e.Err }

// Outputs are the outputs a host's controller that calls Sync declares: the facts (the machines' platform
// metadata, addresses and lifecycle), which it alone writes.
// While a cluster's talos-ccm pipeline reads its facts from a host, its Talos source is off, and no
// controller of the pipeline writes them.
func Outputs() []controller.Output {
	return []controller.Output{
		{Type: talos.PlatformMetadataType, Kind: controller.OutputExclusive},
		{Type: talos.MachineAddressesType, Kind: controller.OutputExclusive},
		{Type: talos.MachineStatusType, Kind: controller.OutputExclusive},
	}
}

// Sync makes the facts in the namespace ns those of machines: it writes the PlatformMetadata, the
// MachineAddresses and, for a machine that gives its lifecycle, the MachineStatus of every valid machine
// (their IDs are the Node names; an unchanged fact is not written again), and destroys the facts of the
// Node names no longer listed, and the MachineStatus of a machine that no longer gives its lifecycle. opts
// are the host's choices (ExposureFromIP, DeleteRemovedNodes); give the same on every call. ns is the namespace of the facts in the
// host's state: the cluster's prefixed talos namespace (the cluster's namespace prefix followed by
// "talos", as pkg/ccm's HostNamespace(prefix, TalosNamespace) returns it).
//
// A machine that Validate refuses, and every machine of a Node name listed more than once, keeps the facts
// it had: Sync writes the others, then returns one *InvalidMachineError for each of them, joined. A failure
// of the state is returned at once, wrapped; calling Sync again resumes.
//
// rw is the controller.Runtime of the host's controller (or any writer with Outputs as its outputs).
func Sync(ctx context.Context, rw controller.ReaderWriter, ns resource.Namespace, machines []Machine, opts ...Option) error {
	listed := make(map[string]int, len(machines))
	for _, m := range machines {
		listed[m.NodeName]++
	}

	var (
		invalid []error
		// quiet are the valid machines that give no lifecycle: a MachineStatus they had goes.
		quiet = map[string]bool{}
	)

	for i, m := range machines {
		if n := listed[m.NodeName]; n > 1 {
			invalid = append(invalid, &InvalidMachineError{Index: i, NodeName: m.NodeName, Err: fmt.Errorf("the Node name is listed %d times", n)})

			continue
		}

		if err := m.Validate(); err != nil {
			invalid = append(invalid, &InvalidMachineError{Index: i, NodeName: m.NodeName, Err: err})

			continue
		}

		wroteStatus, err := write(ctx, rw, ns, m, opts)
		if err != nil {
			return err
		}

		quiet[m.NodeName] = !wroteStatus
	}

	// The facts of an invalid machine stay: its Node name is listed, as the host still knows the machine.
	if err := destroyUnlisted(ctx, rw, ns, listed, quiet); err != nil {
		return err
	}

	return errors.Join(invalid...)
}

// write writes the facts of a valid machine, and says whether it gave a lifecycle to write.
func write(ctx context.Context, rw controller.ReaderWriter, ns resource.Namespace, m Machine, opts []Option) (bool, error) {
	addresses, err := m.MachineAddressesSpec(opts...)
	if err != nil {
		return false, err
	}

	if err = safe.WriterModify(ctx, rw, talos.NewPlatformMetadata(ns, m.NodeName), func(res *talos.PlatformMetadata) error {
		res.TypedSpec().Value = m.PlatformMetadataSpec()

		return nil
	}); err != nil {
		return false, fmt.Errorf("failed to write platform metadata of %q: %w", m.NodeName, err)
	}

	if err = safe.WriterModify(ctx, rw, talos.NewMachineAddresses(ns, m.NodeName), func(res *talos.MachineAddresses) error {
		res.TypedSpec().Value = addresses

		return nil
	}); err != nil {
		return false, fmt.Errorf("failed to write addresses of %q: %w", m.NodeName, err)
	}

	status := m.MachineStatusSpec(opts...)
	if status == nil {
		return false, nil
	}

	if err = safe.WriterModify(ctx, rw, talos.NewMachineStatus(ns, m.NodeName), func(res *talos.MachineStatus) error {
		res.TypedSpec().Value = status

		return nil
	}); err != nil {
		return false, fmt.Errorf("failed to write machine status of %q: %w", m.NodeName, err)
	}

	return true, nil
}

// destroyUnlisted destroys the facts in ns whose Node name is not listed, and the MachineStatus of the quiet
// machines.
func destroyUnlisted(ctx context.Context, rw controller.ReaderWriter, ns resource.Namespace, listed map[string]int, quiet map[string]bool) error {
	for _, kind := range []resource.Kind{
		talos.NewPlatformMetadata(ns, "").Metadata(),
		talos.NewMachineAddresses(ns, "").Metadata(),
		talos.NewMachineStatus(ns, "").Metadata(),
	} {
		statuses := kind.Type() == talos.MachineStatusType

		list, err := rw.List(ctx, kind)
		if err != nil {
			return fmt.Errorf("failed to list %s: %w", kind.Type(), err)
		}

		for _, res := range list.Items {
			if id := res.Metadata().ID(); listed[id] > 0 && (!statuses || !quiet[id]) {
				continue
			}

			if err = rw.Destroy(ctx, res.Metadata()); err != nil && !state.IsNotFoundError(err) {
				return fmt.Errorf("failed to destroy %s %q: %w", kind.Type(), res.Metadata().ID(), err)
			}
		}
	}

	return nil
}

package ccm

import (
	"context"
	"errors"
	"fmt"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/controller/runtime"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
)

// PipelineControllerName returns the name of the controller that Register adds to a host's runtime for the
// pipeline of a namespace prefix, such as "talos-ccm[cluster-a:]": one per prefix, so that one host runtime
// holds the pipelines of several clusters.
func PipelineControllerName(prefix string) string {
	return "talos-ccm[" + prefix + "]"
}

// pipelineController runs one cluster's talos-ccm pipeline as one controller of a host's runtime, which
// starts it, restarts it with its backoff when it fails, and stops it with the other controllers. Each run
// builds the pipeline as New does with the cluster's namespace prefix (a talos-ccm runtime over the
// prefixed view of the host's state, the Kubernetes informers, the controllers), runs it until the host
// runtime stops the controller or the pipeline fails, and stops the informers and the talos-ccm runtime
// before it returns.
type pipelineController struct {
	// host is the host's state: each run builds its prefixed view.
	host state.State
	// opts are the pipeline's options, with the namespace prefix.
	opts Options
	// runs follows the runs for the handle that Register returned.
	runs *pipelineRuns
}

// registerPipelineController is Register with a namespace prefix. The pipeline is built once here, and
// dropped, so that bad options are reported to the caller rather than by a controller that fails at every
// restart, and so that the prefixed namespaces and resource definitions are in the host's state before the
// host runtime starts.
func registerPipelineController(ctx context.Context, rt *runtime.Runtime, st state.State, opts Options) (*CCM, error) {
	if st == nil {
		return nil, errors.New("failed to register talos-ccm: no host state")
	}

	checked, err := New(ctx, st, opts)
	if err != nil {
		return nil, err
	}

	checked.CCM().Close()

	runs := newPipelineRuns()

	if err = rt.RegisterController(&pipelineController{host: st, opts: opts, runs: runs}); err != nil {
		return nil, fmt.Errorf("failed to register talos-ccm for the namespace prefix %q: %w", opts.NamespacePrefix, err)
	}

	c := checked.CCM()

	return &CCM{
		runtime: rt,
		state:   checked.State(),
		opts:    c.opts,
		enabled: c.enabled,
		logger:  c.logger,
		runs:    runs,
	}, nil
}

// Name implements controller.Controller.
func (ctrl *pipelineController) Name() string {
	return PipelineControllerName(ctrl.opts.NamespacePrefix)
}

// Inputs implements controller.Controller. There are none: the pipeline's controllers run in a talos-ccm
// runtime of their own, which declares their inputs in its own dependency graph and watches the host's
// state through the prefixed view itself.
func (ctrl *pipelineController) Inputs() []controller.Input {
	return nil
}

// Outputs implements controller.Controller. There are none, because nothing goes through the
// controller.Runtime the host runtime hands this controller: the pipeline's controllers write straight to
// the host's state, through the prefixed view, each under its own name as owner (such as
// "node.NodeTransformController"), and declare their outputs to the talos-ccm runtime, which checks them.
// The host runtime never sees those writes as its own, so its controllers' outputs (such as the facts a
// host controller writes as PlatformMetadata) never conflict with the pipeline's; what a host controller
// reads of them, it reads as resources owned by the pipeline's controllers.
func (ctrl *pipelineController) Outputs() []controller.Output {
	return nil
}

// Run implements controller.Controller: it runs the pipeline until ctx is done (nil) or the pipeline fails
// (an error, so that the host runtime restarts it with its backoff, which is reset once the informers have
// synced). The pipeline logs with Options.Logger, as New's does: the logger of the host runtime names this
// controller in a "controller" field, which the talos-ccm runtime's own would repeat.
func (ctrl *pipelineController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	instance, err := New(ctx, ctrl.host, ctrl.opts)
	if err != nil {
		return fmt.Errorf("failed to build the talos-ccm pipeline: %w", err)
	}

	ctrl.runs.start(instance.CCM())
	defer ctrl.runs.stop()

	err = instance.run(ctx, func() {
		r.ResetRestartBackoff()
		ctrl.runs.synced()
		logger.Debug("talos-ccm pipeline synced")
	})

	return pipelineRunError(ctx, err)
}

// pipelineRunError is what Run returns once the talos-ccm runtime returned err: nil when the host runtime
// stopped the controller, an error otherwise. The host runtime takes an error that wraps context.Canceled
// for a clean stop and would not restart the controller: a failure while ctx is still live is reported
// without wrapping its cause then.
func pipelineRunError(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return nil
	case err == nil:
		return errors.New("talos-ccm runtime stopped on its own")
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("talos-ccm runtime failed: %v", err) //nolint:errorlint // See above: not a clean stop.
	default:
		return fmt.Errorf("talos-ccm runtime failed: %w", err)
	}
}

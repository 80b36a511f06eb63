package csr

import (
	"context"
	"fmt"
	"slices"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/kube"
	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
	"github.com/talos-ccm/talos-ccm/internal/stateread"
)

// maxTalosServiceCIDRs bounds the Service ranges merged from the control-plane machines.
const maxTalosServiceCIDRs = 16

// reservedFacts reads the facts rule 9 needs beyond the configuration: the Service ranges from the
// control-plane machines' ControllerManagerConfig (only when the configuration has none), and the
// apiserver's endpoints. Each read is of a handful of resources, whatever the number of nodes or requests.
func (d *csrDecider) reservedFacts(ctx context.Context, r controller.Reader, cfg *specs.ConfigSpec) (ReservedFacts, error) {
	facts := ReservedFacts{ServiceCIDRsFromTalos: d.opts.ServiceCIDRsFromTalos, APIServerSource: d.opts.APIServerSource}

	if facts.ServiceCIDRsFromTalos && len(cfg.GetServiceCidrs()) == 0 {
		configs, err := safe.ReaderListAll[*talos.ControllerManagerConfig](ctx, r)
		if err != nil {
			return facts, fmt.Errorf("failed to list controller manager configs: %w", err)
		}

		// Control-plane machines that disagree (while a change rolls out) all count: the union is refused.
		for res := range configs.All() {
			if res.Metadata().Phase() != resource.PhaseRunning {
				continue
			}

			for _, cidr := range res.TypedSpec().Value.GetServiceCidrs() {
				if !slices.Contains(facts.TalosServiceCIDRs, cidr) && len(facts.TalosServiceCIDRs) < maxTalosServiceCIDRs {
					facts.TalosServiceCIDRs = append(facts.TalosServiceCIDRs, cidr)
				}
			}
		}

		slices.Sort(facts.TalosServiceCIDRs)
	}

	if facts.APIServerSource {
		synced, err := stateread.Running[*kube.KubeSync](ctx, r, kube.APIServerSyncID)
		if err != nil {
			return facts, err
		}

		apiServer, err := stateread.Running[*kube.KubeAPIServer](ctx, r, kube.KubeAPIServerID)
		if err != nil {
			return facts, err
		}

		facts.APIServerRead = synced != nil || apiServer != nil

		if apiServer != nil {
			facts.APIServerIPs = apiServer.TypedSpec().Value.GetEndpointIps()
		}
	}

	return facts, nil
}

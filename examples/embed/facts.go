package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/cosi-project/runtime/pkg/controller"
	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/safe"
	"github.com/cosi-project/runtime/pkg/state"
	"go.uber.org/zap"
	"gopkg.in/yaml.v3"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// rereadInterval is how often the facts file is read again.
const rereadInterval = 5 * time.Second

// Machine is one machine's facts in the facts file.
type Machine struct {
	Name         string    `yaml:"name"`
	Platform     string    `yaml:"platform"`
	Region       string    `yaml:"region"`
	Zone         string    `yaml:"zone"`
	InstanceType string    `yaml:"instanceType"`
	ProviderID   string    `yaml:"providerID"`
	NodeIP       string    `yaml:"nodeIP"`
	Addresses    []Address `yaml:"addresses"`
}

// Address is one address of a machine, with the link it is on.
type Address struct {
	Address string `yaml:"address"`
	Link    string `yaml:"link"`
}

// FactsFile is the facts file: the machines of every cluster.
type FactsFile struct {
	Clusters map[string][]Machine `yaml:"clusters"`
}

// FactsController is the host's own controller: it reads the facts file and writes every machine's
// PlatformMetadata and MachineAddresses into the state of its cluster's talos-ccm, and destroys the facts
// of machines no longer listed. It talks to the outside (the file and the clusters' states), so it has no
// inputs or outputs in the host runtime.
type FactsController struct {
	// Path is the facts file.
	Path string
	// Clusters are the states of the embedded talos-ccm instances, by cluster name.
	Clusters map[string]state.State
}

// Name implements controller.Controller interface.
func (ctrl *FactsController) Name() string { return "embed.FactsController" }

// Inputs implements controller.Controller interface.
func (ctrl *FactsController) Inputs() []controller.Input { return nil }

// Outputs implements controller.Controller interface.
func (ctrl *FactsController) Outputs() []controller.Output { return nil }

// Run implements controller.Controller interface.
func (ctrl *FactsController) Run(ctx context.Context, _ controller.Runtime, logger *zap.Logger) error {
	ticker := time.NewTicker(rereadInterval)
	defer ticker.Stop()

	for {
		if err := ctrl.sync(ctx); err != nil {
			// A bad file or a failed write is retried at the next tick.
			logger.Error("failed to feed facts", zap.String("path", ctrl.Path), zap.Error(err))
		}

		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
	}
}

func (ctrl *FactsController) sync(ctx context.Context) error {
	data, err := os.ReadFile(ctrl.Path)
	if err != nil {
		return fmt.Errorf("failed to read facts file: %w", err)
	}

	var file FactsFile
	if err = yaml.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("failed to parse facts file: %w", err)
	}

	for cluster, st := range ctrl.Clusters {
		if err = writeFacts(ctx, st, file.Clusters[cluster]); err != nil {
			return fmt.Errorf("failed to write the facts of cluster %s: %w", cluster, err)
		}
	}

	return nil
}

func writeFacts(ctx context.Context, st state.State, machines []Machine) error {
	listed := map[resource.ID]bool{}

	for _, m := range machines {
		listed[m.Name] = true

		if err := safe.StateModify(ctx, st, ccm.NewPlatformMetadata(m.Name), func(r *ccm.PlatformMetadata) error {
			r.TypedSpec().Value = &specs.PlatformMetadataSpec{
				Platform:            m.Platform,
				Hostname:            m.Name,
				Region:              m.Region,
				Zone:                m.Zone,
				InstanceType:        m.InstanceType,
				ProviderId:          m.ProviderID,
				HasPlatformMetadata: true,
			}

			return nil
		}); err != nil {
			return fmt.Errorf("failed to write PlatformMetadata %s: %w", m.Name, err)
		}

		addresses, err := machineAddresses(m)
		if err != nil {
			return err
		}

		if err = safe.StateModify(ctx, st, ccm.NewMachineAddresses(m.Name), func(r *ccm.MachineAddresses) error {
			r.TypedSpec().Value = addresses

			return nil
		}); err != nil {
			return fmt.Errorf("failed to write MachineAddresses %s: %w", m.Name, err)
		}
	}

	return destroyUnlisted(ctx, st, listed)
}

func machineAddresses(m Machine) (*specs.MachineAddressesSpec, error) {
	out := &specs.MachineAddressesSpec{NodeIp: m.NodeIP}

	for _, a := range m.Addresses {
		prefix, err := netip.ParsePrefix(a.Address)
		if err != nil {
			return nil, fmt.Errorf("machine %s: invalid address %q: %w", m.Name, a.Address, err)
		}

		family := "inet4"
		if prefix.Addr().Is6() {
			family = "inet6"
		}

		out.Addresses = append(out.Addresses, &specs.MachineAddress{
			Address: prefix.String(), LinkName: a.Link, Scope: "global", Family: family,
		})
	}

	return out, nil
}

func destroyUnlisted(ctx context.Context, st state.State, listed map[resource.ID]bool) error {
	var gone []resource.Pointer

	pms, err := safe.StateListAll[*ccm.PlatformMetadata](ctx, st)
	if err != nil {
		return fmt.Errorf("failed to list PlatformMetadata: %w", err)
	}

	for r := range pms.All() {
		if !listed[r.Metadata().ID()] {
			gone = append(gone, r.Metadata())
		}
	}

	mas, err := safe.StateListAll[*ccm.MachineAddresses](ctx, st)
	if err != nil {
		return fmt.Errorf("failed to list MachineAddresses: %w", err)
	}

	for r := range mas.All() {
		if !listed[r.Metadata().ID()] {
			gone = append(gone, r.Metadata())
		}
	}

	for _, ptr := range gone {
		if err = st.Destroy(ctx, ptr); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy %s %s: %w", ptr.Type(), ptr.ID(), err)
		}
	}

	return nil
}

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
// PlatformMetadata and MachineAddresses into its cluster's prefixed talos namespace of the host's state
// (where that cluster's talos-ccm reads them), and destroys the facts of machines no longer listed. The
// facts are its outputs; it has no inputs (it reads a file).
type FactsController struct {
	// Path is the facts file.
	Path string
	// Prefixes are the namespace prefixes of the embedded talos-ccm instances, by cluster name.
	Prefixes map[string]string
}

// Name implements controller.Controller interface.
func (ctrl *FactsController) Name() string { return "embed.FactsController" }

// Inputs implements controller.Controller interface.
func (ctrl *FactsController) Inputs() []controller.Input { return nil }

// Outputs implements controller.Controller interface.
func (ctrl *FactsController) Outputs() []controller.Output {
	return []controller.Output{
		{Type: ccm.PlatformMetadataType, Kind: controller.OutputExclusive},
		{Type: ccm.MachineAddressesType, Kind: controller.OutputExclusive},
	}
}

// Run implements controller.Controller interface.
func (ctrl *FactsController) Run(ctx context.Context, r controller.Runtime, logger *zap.Logger) error {
	ticker := time.NewTicker(rereadInterval)
	defer ticker.Stop()

	for {
		if err := ctrl.sync(ctx, r); err != nil {
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

func (ctrl *FactsController) sync(ctx context.Context, r controller.Runtime) error {
	data, err := os.ReadFile(ctrl.Path)
	if err != nil {
		return fmt.Errorf("failed to read facts file: %w", err)
	}

	var file FactsFile
	if err = yaml.Unmarshal(data, &file); err != nil {
		return fmt.Errorf("failed to parse facts file: %w", err)
	}

	for cluster, prefix := range ctrl.Prefixes {
		if err = writeFacts(ctx, r, ccm.HostNamespace(prefix, ccm.TalosNamespace), file.Clusters[cluster]); err != nil {
			return fmt.Errorf("failed to write the facts of cluster %s: %w", cluster, err)
		}
	}

	return nil
}

// writeFacts writes the facts of machines into the namespace ns of the host's state, and destroys the
// others there.
func writeFacts(ctx context.Context, r controller.Runtime, ns resource.Namespace, machines []Machine) error {
	listed := map[resource.ID]bool{}

	for _, m := range machines {
		listed[m.Name] = true

		if err := safe.WriterModify(ctx, r, ccm.NewPlatformMetadataIn(ns, m.Name), func(pm *ccm.PlatformMetadata) error {
			pm.TypedSpec().Value = &specs.PlatformMetadataSpec{
				// The host knows which machine is which Node, and says so: talos-ccm gives a Node only
				// facts that name it.
				Nodename:            m.Name,
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

		if err = safe.WriterModify(ctx, r, ccm.NewMachineAddressesIn(ns, m.Name), func(ma *ccm.MachineAddresses) error {
			ma.TypedSpec().Value = addresses

			return nil
		}); err != nil {
			return fmt.Errorf("failed to write MachineAddresses %s: %w", m.Name, err)
		}
	}

	return destroyUnlisted(ctx, r, ns, listed)
}

func machineAddresses(m Machine) (*specs.MachineAddressesSpec, error) {
	out := &specs.MachineAddressesSpec{NodeIp: m.NodeIP, Nodename: m.Name}

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

func destroyUnlisted(ctx context.Context, r controller.Runtime, ns resource.Namespace, listed map[resource.ID]bool) error {
	var gone []resource.Pointer

	pms, err := safe.ReaderList[*ccm.PlatformMetadata](ctx, r, ccm.NewPlatformMetadataIn(ns, "").Metadata())
	if err != nil {
		return fmt.Errorf("failed to list PlatformMetadata: %w", err)
	}

	for pm := range pms.All() {
		if !listed[pm.Metadata().ID()] {
			gone = append(gone, pm.Metadata())
		}
	}

	mas, err := safe.ReaderList[*ccm.MachineAddresses](ctx, r, ccm.NewMachineAddressesIn(ns, "").Metadata())
	if err != nil {
		return fmt.Errorf("failed to list MachineAddresses: %w", err)
	}

	for ma := range mas.All() {
		if !listed[ma.Metadata().ID()] {
			gone = append(gone, ma.Metadata())
		}
	}

	for _, ptr := range gone {
		if err = r.Destroy(ctx, ptr); err != nil && !state.IsNotFoundError(err) {
			return fmt.Errorf("failed to destroy %s %s: %w", ptr.Type(), ptr.ID(), err)
		}
	}

	return nil
}

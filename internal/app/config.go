package app

import (
	"fmt"
	"math"
	"time"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/resources/config"
)

// loadConfigFile reads the config file; an empty path means none.
func loadConfigFile(path string) (*specs.ConfigSpec, error) {
	if path == "" {
		return nil, nil
	}

	spec, err := configfile.Load(path)
	if err != nil {
		return nil, fmt.Errorf("failed to load config file: %w", err)
	}

	return spec, nil
}

// flagsConfig is the config of the command-line flags and their defaults, with the ConfigSpec fields
// given explicitly: those win over the config file, which wins over the defaults. The talosconfig context
// name is the default cluster name.
func flagsConfig(opts Options, contextName string) (*specs.ConfigSpec, []string) {
	spec := &specs.ConfigSpec{
		ClusterName:           opts.ClusterName,
		PreferIpv6:            opts.PreferIPv6,
		ProviderIdWaitSeconds: int64(opts.ProviderIDWait / time.Second),
		Source:                "flags",

		DisableBetaTopologyLabels: opts.DisableBetaTopologyLabels,
	}

	var explicit []string

	switch {
	case opts.ClusterName != "":
		spec.ClusterNameSource = "flag --cluster-name"
		explicit = append(explicit, "cluster_name")
	case contextName != "":
		spec.ClusterName = contextName
		spec.ClusterNameSource = "talosconfig context"
	}

	if opts.PreferIPv6 || opts.PreferIPv6Set {
		explicit = append(explicit, "prefer_ipv6")
	}

	// Invalid ranges stop Run before this (applyIPAMFlags).
	if ranges, err := parseCIDRs(opts.ServiceClusterIPRanges, ""); err == nil && len(ranges) > 0 {
		for _, r := range ranges {
			spec.ServiceCidrs = append(spec.ServiceCidrs, r.String())
		}

		explicit = append(explicit, "service_cidrs")
	}

	// The CSR approver's settings: the cluster domain and the longest lifetime, each explicit when given;
	// a csrApproval section of the config file without maxExpirationSeconds keeps the flag's value.
	spec.ClusterDomain = config.DefaultClusterDomain
	if opts.ClusterDomain != "" {
		spec.ClusterDomain = opts.ClusterDomain
		explicit = append(explicit, "cluster_domain")
	}

	spec.CsrApproval = &specs.CSRApprovalConfig{
		MaxExpirationSeconds: int64(opts.CSRMaxExpiration / time.Second),
		RequestsPerMinute:    int32(min(opts.CSRRequestsPerMinute, math.MaxInt32)), //nolint:gosec // Bounded on the line.
	}
	if opts.CSRMaxExpirationSet {
		explicit = append(explicit, "csr_approval.max_expiration_seconds")
	}

	return spec, explicit
}

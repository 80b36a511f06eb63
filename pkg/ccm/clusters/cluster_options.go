package clusters

import (
	"fmt"
	"net/netip"

	"github.com/cosi-project/runtime/pkg/resource"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/pkg/ccm"
)

// clusterPrefix is the namespace prefix of a cluster: its spec's, or its ID followed by the separator.
func clusterPrefix(id resource.ID, spec *specs.ClusterSpec) string {
	if prefix := spec.GetNamespacePrefix(); prefix != "" {
		return prefix
	}

	return id + NamespacePrefixSeparator
}

// clusterReconcileWorkers is the reconcile workers of each queued controller of a cluster (see
// ccm.Options.ReconcileConcurrency), instead of the service's 4 to 16: a decision is a pure function of a
// few resources, so that one worker decides thousands of Nodes a second, and a cluster's Node writes stay
// bounded by its Concurrency, not by these workers.
const clusterReconcileWorkers = 1

// clusterConfig is what a cluster's pipeline is built with: its options, and the namespace prefix under
// which its resources live in the host's state.
type clusterConfig struct {
	ccm.Options

	// NamespacePrefix stores every talos-ccm namespace N as NamespacePrefix+N in the host's state (see
	// HostNamespace).
	NamespacePrefix string
}

// clusterOptions are the pipeline options a Cluster declares, or an error that says what in it is wrong.
// What a spec cannot carry (the logger, the client provider) is the host controller's to add.
func clusterOptions(id resource.ID, spec *specs.ClusterSpec) (clusterConfig, error) {
	opts := clusterConfig{
		NamespacePrefix: clusterPrefix(id, spec),
		Options: ccm.Options{
			Controllers: spec.GetControllers(),
			HostFacts:   spec.GetHostFacts(),
			Concurrency: int(spec.GetConcurrency()),
			// One reconcile worker per queued controller: a host's cluster is mostly a handful of idle
			// Nodes, and each worker is a goroutine for the life of the cluster.
			ReconcileConcurrency: clusterReconcileWorkers,
			// One connection to the apiserver for the whole cluster: a host's cluster has a handful of Nodes,
			// too few for its Node traffic to hold back its certificate requests, and each connection costs
			// heap and a read loop for the life of the cluster.
			SharedConnection: true,
			// The definitions of talos-ccm's types are the same for every cluster: RegisterResources puts
			// them in the host's own meta namespace once, not each cluster in its prefix's.
			SkipResourceDefinitions: true,
			// A host that partitions one apiserver between its clusters gives each its Nodes' selector.
			NodeSelector: spec.GetNodeSelector(),
		},
	}

	if err := ValidateNamespacePrefix(opts.NamespacePrefix); err != nil {
		if spec.GetNamespacePrefix() == "" {
			return clusterConfig{}, fmt.Errorf("cluster ID %q is no namespace prefix, give one (namespacePrefix): %w", id, err)
		}

		return clusterConfig{}, err
	}

	if _, err := ccm.EnabledControllers(opts.Controllers); err != nil {
		return clusterConfig{}, err
	}

	if _, err := labels.Parse(opts.NodeSelector); err != nil {
		return clusterConfig{}, fmt.Errorf("invalid nodeSelector %q: %w", opts.NodeSelector, err)
	}

	if opts.Concurrency < 0 {
		return clusterConfig{}, fmt.Errorf("invalid concurrency %d: want a positive number, or zero for the default", opts.Concurrency)
	}

	// The spec's config is merged over the defaults: a host sets only what it changes.
	opts.Config = ccm.DefaultConfig()
	opts.Config.ClusterName = id

	if cfg := spec.GetConfig(); cfg != nil {
		proto.Merge(opts.Config, cfg)
	}

	lifecycle := spec.GetNodeLifecycle()
	opts.NodeLifecycle = ccm.NodeLifecycleOptions{
		DeleteStaleNodes:         lifecycle.GetDeleteStaleNodes(),
		DeletePreemptedSpotNodes: lifecycle.GetDeletePreemptedSpotNodes(),
	}

	if grace := lifecycle.GetStaleNodeGrace(); grace != nil {
		if err := grace.CheckValid(); err != nil || grace.AsDuration() < 0 {
			return clusterConfig{}, fmt.Errorf("invalid nodeLifecycle.staleNodeGrace %s: want a positive duration", grace)
		}

		opts.NodeLifecycle.StaleNodeGrace = grace.AsDuration()
	}

	ipamSpec := spec.GetNodeIpam()
	opts.NodeIPAM = ccm.NodeIPAMOptions{
		Mode:     ipamSpec.GetMode(),
		MaskIPv4: int(ipamSpec.GetMaskIpv4()),
		MaskIPv6: int(ipamSpec.GetMaskIpv6()),
	}

	for _, cidr := range ipamSpec.GetClusterCidrs() {
		prefix, err := netip.ParsePrefix(cidr)
		if err != nil {
			return clusterConfig{}, fmt.Errorf("invalid nodeIPAM.clusterCIDRs entry %q: %w", cidr, err)
		}

		opts.NodeIPAM.ClusterCIDRs = append(opts.NodeIPAM.ClusterCIDRs, prefix)
	}

	return opts, nil
}

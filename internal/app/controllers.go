package app

import "github.com/talos-ccm/talos-ccm/pkg/ccm"

// Controller names for --controllers, as pkg/ccm defines them.
const (
	// ControllerCloudNode initializes Nodes: providerID, labels, addresses, transformations.
	ControllerCloudNode = ccm.ControllerCloudNode
	// ControllerCSRApproval approves kubelet serving certificates.
	ControllerCSRApproval = ccm.ControllerCSRApproval
	// ControllerNodeIPAM allocates pod CIDRs.
	ControllerNodeIPAM = ccm.ControllerNodeIPAM
	// ControllerServiceLB allocates LoadBalancer IPs.
	ControllerServiceLB = ccm.ControllerServiceLB
	// ControllerNodeLifecycle taints shut-down Nodes (and, opt-in, deletes stale ones).
	ControllerNodeLifecycle = ccm.ControllerNodeLifecycle
)

// EnabledControllers resolves a --controllers list: see ccm.EnabledControllers.
func EnabledControllers(spec []string) (map[string]bool, error) {
	return ccm.EnabledControllers(spec)
}

package ccm

import (
	"fmt"
	"slices"
	"strings"
)

// Controller names, as Options.Controllers and talos-ccm's --controllers flag take them.
const (
	// ControllerCloudNode initializes Nodes: providerID, labels, addresses, transformations.
	ControllerCloudNode = "cloud-node"
	// ControllerCSRApproval approves kubelet serving certificates.
	ControllerCSRApproval = "csr-approval"
	// ControllerNodeIPAM allocates pod CIDRs.
	ControllerNodeIPAM = "node-ipam"
	// ControllerServiceLB allocates LoadBalancer IPs.
	ControllerServiceLB = "service-lb"
	// ControllerNodeLifecycle taints shut-down Nodes (and, opt-in, deletes stale ones).
	ControllerNodeLifecycle = "node-lifecycle"
)

// allControllers are every controller name, in the order they are started.
var allControllers = []string{ControllerCloudNode, ControllerCSRApproval, ControllerNodeIPAM, ControllerServiceLB, ControllerNodeLifecycle}

// AllControllers lists every controller name, in the order they are started. The list is a copy: a host
// that changes it changes nothing of talos-ccm's.
func AllControllers() []string {
	return slices.Clone(allControllers)
}

// defaultControllers are the ones "*" stands for: node-ipam and service-lb are opt-in because they
// conflict with other allocators.
var defaultControllers = []string{ControllerCloudNode, ControllerCSRApproval, ControllerNodeLifecycle}

// EnabledControllers resolves a --controllers list (Options.Controllers) the way kube-controller-manager does: "*" is the
// default set, "name" adds one, "-name" removes one. An empty list means "*".
func EnabledControllers(spec []string) (map[string]bool, error) {
	if len(spec) == 0 {
		spec = []string{"*"}
	}

	enabled := map[string]bool{}

	for _, item := range spec {
		item = strings.TrimSpace(item)

		switch {
		case item == "*":
			for _, name := range defaultControllers {
				if _, set := enabled[name]; !set {
					enabled[name] = true
				}
			}
		case strings.HasPrefix(item, "-"):
			name := strings.TrimPrefix(item, "-")
			if !slices.Contains(allControllers, name) {
				return nil, fmt.Errorf("unknown controller %q in --controllers (known: %s)", name, strings.Join(allControllers, ", "))
			}

			enabled[name] = false
		default:
			if !slices.Contains(allControllers, item) {
				return nil, fmt.Errorf("unknown controller %q in --controllers (known: %s)", item, strings.Join(allControllers, ", "))
			}

			enabled[item] = true
		}
	}

	for name, on := range enabled {
		if !on {
			delete(enabled, name)
		}
	}

	if len(enabled) == 0 {
		return nil, fmt.Errorf("--controllers %q enables no controller", strings.Join(spec, ","))
	}

	return enabled, nil
}

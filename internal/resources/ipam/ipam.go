// Package ipam holds the IP allocations (pod CIDRs of Nodes, LoadBalancer IPs of Services) and the pools
// they come from.
package ipam

import "github.com/cosi-project/runtime/pkg/resource"

// NamespaceName is the default namespace of the ipam group.
const NamespaceName resource.Namespace = "ipam"

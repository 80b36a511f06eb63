package main

import (
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// nodeStatus is the status a Node of the bench carries, the floor's as the simulated kubelets': what a
// kubelet posts (talossim.KubeletStatus), or its bare part with --bare-nodes. Both write to Nodes of one
// size, since the apiserver's cost of a write, and talos-ccm's of decoding what it watches, grow with it.
func nodeStatus(name string, bare bool) corev1.NodeStatus {
	status := talossim.KubeletStatus(talossim.Machine{Name: name}, talossim.DefaultKubeletVersion, time.Now())
	if bare {
		return talossim.BareKubeletStatus(status)
	}

	return status
}

// nodeStatusName names what the bench's Nodes carry, for the CSV: "kubelet" or "bare".
func nodeStatusName(bare bool) string {
	if bare {
		return "bare"
	}

	return "kubelet"
}

// nodeStatusText says what the bench's Nodes carry, for the report's header.
func nodeStatusText(bare bool) string {
	size := 0
	if status, err := json.Marshal(nodeStatus("floor-00000", bare)); err == nil {
		size = len(status)
	}

	if bare {
		return fmt.Sprintf("NODES carry a bare status (--bare-nodes): node info, capacity, four conditions, no images "+
			"(%.1f KB of JSON for the status alone), the floor's Nodes too", float64(size)/1000)
	}

	return fmt.Sprintf("NODES carry the status a kubelet posts: %d images (a digest and a tag each), node info, capacity "+
		"and allocatable with huge pages, four conditions with the kubelet's messages, the runtime's handlers "+
		"(%.1f KB of JSON for the status alone), the floor's Nodes too", talossim.NodeStatusImages, float64(size)/1000)
}

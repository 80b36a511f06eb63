package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unlinked are the packages talos-ccm's binary must not link: client-go's registry of every built-in API
// group, and what only the Clientset and its informer factory bring (informers, apply configurations, the typed
// clients); the Talos machinery client and its config (OpenPGP, CNI, API signatures), machinery's resources and
// machine config (CEL, netlink). Their code is in every pod's resident memory; internal/kubeclient holds the
// groups talos-ccm uses, and the Talos source reads the Talos API's COSI service with the generated
// definitions of the resources. client-go's event recorder and its generic typed client (whose fake-client
// support brings the object tracker) link strategic merge patches, managed fields and the OpenAPI models:
// talos-ccm posts its Events and types its clients itself.
var unlinked = []string{
	"k8s.io/client-go/kubernetes",
	"k8s.io/client-go/informers",
	"k8s.io/client-go/applyconfigurations",
	"k8s.io/client-go/tools/leaderelection",
	"k8s.io/client-go/tools/record",
	"k8s.io/client-go/gentype",
	"k8s.io/client-go/testing",
	"k8s.io/apimachinery/pkg/util/strategicpatch",
	"k8s.io/apimachinery/pkg/util/managedfields",
	"github.com/google/gnostic-models",
	"github.com/siderolabs/talos/pkg/machinery/client",
	"github.com/siderolabs/talos/pkg/machinery/resources",
	"github.com/siderolabs/talos/pkg/machinery/config",
	"github.com/siderolabs/talos/pkg/machinery/constants",
	"github.com/siderolabs/talos/pkg/machinery/nethelpers",
	"github.com/google/cel-go",
	"github.com/ProtonMail/gopenpgp",
	"github.com/containerd/go-cni",
	"github.com/siderolabs/go-api-signature",
	"github.com/cloudflare/circl",
}

// TestBinaryLinksOnlyTheAPIGroupsUsed lists the packages the binary links (go list -deps) and fails on any in
// unlinked, or under one of them.
func TestBinaryLinksOnlyTheAPIGroupsUsed(t *testing.T) {
	t.Parallel()

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("needs the go command")
	}

	out, err := exec.CommandContext(t.Context(), goBin, "list", "-deps", ".").Output()
	require.NoError(t, err, "go list -deps")

	deps := strings.Fields(string(out))
	// The listing is the binary's: a wrong directory would list nothing and pass.
	require.Contains(t, deps, "k8s.io/client-go/rest")

	var linked []string

	for _, dep := range deps {
		for _, prefix := range unlinked {
			if dep == prefix || strings.HasPrefix(dep, prefix+"/") {
				linked = append(linked, dep)
			}
		}
	}

	assert.Empty(t, linked[:min(len(linked), 10)], "%d packages that link every built-in API group, the first ten", len(linked))
}

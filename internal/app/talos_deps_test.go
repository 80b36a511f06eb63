package app_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// talosHeavyPackages are packages talos-ccm's binary must not link, with those under them: the machinery
// client and its config (OpenPGP, CNI, API signatures), machinery's resources and machine config (CEL,
// netlink). The binary's pages
// are in every pod's memory; the Talos source reads the Talos API's COSI service with the generated
// definitions of the resources instead.
var talosHeavyPackages = []string{
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

// TestBinaryLinksNoHeavyTalosPackages lists what cmd/talos-ccm links, and fails on any of
// talosHeavyPackages.
func TestBinaryLinksNoHeavyTalosPackages(t *testing.T) {
	t.Parallel()

	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the binary's packages")
	}

	out, err := exec.CommandContext(t.Context(), goTool, "list", "-deps", "github.com/talos-ccm/talos-ccm/cmd/talos-ccm").Output()
	require.NoError(t, err, "go list -deps")

	deps := strings.Fields(string(out))
	require.Contains(t, deps, "google.golang.org/grpc", "the list is the binary's")

	for _, pkg := range deps {
		for _, heavy := range talosHeavyPackages {
			assert.False(t, pkg == heavy || strings.HasPrefix(pkg, heavy+"/"), "cmd/talos-ccm links %s", pkg)
		}
	}
}

package e2e_test

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/talos-ccm/talos-ccm/internal/app"
	"github.com/talos-ccm/talos-ccm/internal/talossim"
)

// dropinRules are written as a user of the Talos CCM writes them: a hostname rule for metal machines
// (whose PlatformMetadata has no hostname without the talos.hostname= kernel argument) and templates in
// sprig's argument order, piped.
const dropinRules = `transformations:
  - name: web
    nodeSelector:
      - matchExpressions:
          - key: platform
            operator: In
            values: [metal]
          - key: hostname
            operator: Regexp
            values: ['^dropin-web-[0-9]+$']
    labels:
      example.com/role: web
    annotations:
      example.com/short: '{{ .Hostname | trimPrefix "dropin-" | upper }}'
      example.com/lan: '{{ printf "%s.lan" .Hostname | trimSuffix ".lan" | replace "-" "_" }}'
`

// dropinMachine is a metal machine without a hostname in its PlatformMetadata.
func dropinMachine(name string, index byte, addresses ...talossim.Address) talossim.Machine {
	ip := netip.AddrFrom4([4]byte{10, 213, 0, index})

	return talossim.Machine{
		Name:               name,
		Platform:           "metal",
		NoPlatformHostname: true,
		Stage:              "running",
		NodeIPs:            []netip.Addr{ip},
		Addresses:          append([]talossim.Address{{LinkName: "eno1", Prefix: netip.PrefixFrom(ip, 24), Scope: "global"}}, addresses...),
		System:             talossim.SystemInfo{Manufacturer: "Supermicro", UUID: fmt.Sprintf("5e1f0c2a-7d3b-4e59-9a61-%012d", 213000+int(index))},
	}
}

// TestDropIn runs what Talos CCM users have on metal: a hostname rule for machines whose hostname Talos does
// not report (the Node name stands in), a piped sprig-order template, and a machine with a temporary
// (privacy) IPv6 address next to its permanent one (only the permanent one is its ExternalIP).
func TestDropIn(t *testing.T) {
	// The temporary address sorts first, by link and address, so only its flag keeps it out.
	privacy := talossim.Address{LinkName: "eno1", Prefix: netip.MustParsePrefix("2001:db8:213:0:8d3e:1c2f:9a0b:77e1/64"), Scope: "global", Flags: "temporary"}
	stable := talossim.Address{LinkName: "eno1", Prefix: netip.MustParsePrefix("2001:db8:213::12/64"), Scope: "global"}
	leaving := talossim.Address{LinkName: "eno1", Prefix: netip.MustParsePrefix("2001:db8:213:0:1::12/64"), Scope: "global", Flags: "deprecated"}

	web := dropinMachine("dropin-web-1", 11)
	db := dropinMachine("dropin-db-1", 12, privacy, leaving, stable)
	machines := []talossim.Machine{web, db}

	_, srv := talossim.StartTest(t, machines)

	path := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(path, []byte(dropinRules), 0o600))

	startCCM(t, srv, app.Options{ConfigFile: path})
	joinNodes(t, machines)

	waitNodes(t, names(machines), 60*time.Second, initialized)

	get := func(name string) *corev1.Node {
		n, err := env.Clientset().CoreV1().Nodes().Get(t.Context(), name, metav1.GetOptions{})
		require.NoError(t, err)

		return n
	}

	// The hostname rule matches the metal machine through its Node name, and the piped templates run in
	// sprig's order.
	n := get(web.Name)
	assert.Equal(t, "web", n.Labels["example.com/role"])
	assert.Equal(t, "WEB-1", n.Annotations["example.com/short"])
	assert.Equal(t, "dropin_web_1", n.Annotations["example.com/lan"])
	assert.Contains(t, n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: web.Name})

	// The rule selects by hostname: the other machine's Node name does not match.
	n = get(db.Name)
	assert.NotContains(t, n.Labels, "example.com/role")
	assert.Contains(t, n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeHostName, Address: db.Name})

	// Its ExternalIP is the permanent address, never the temporary or the deprecated one.
	var external []string

	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeExternalIP {
			external = append(external, a.Address)
		}
	}

	assert.Equal(t, []string{"2001:db8:213::12"}, external)
	assert.False(t, slices.ContainsFunc(n.Status.Addresses, func(a corev1.NodeAddress) bool {
		return a.Address == privacy.Prefix.Addr().String() || a.Address == leaving.Prefix.Addr().String()
	}))
}

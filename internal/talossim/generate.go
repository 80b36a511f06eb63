package talossim

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
)

// Generate returns a deterministic, varied fleet of count machines: the same seed always gives the
// same fleet.
//
// Platforms are drawn in shuffled rounds, so every platform appears once in every run of seven
// machines. The first machine (the first three from ten machines on) is a control-plane machine.
// About a third of the machines are dual stack. Public addresses come from the documentation ranges
// (they are never dialed) and wrap after 762 machines.
func Generate(count int, seed int64) []Machine {
	g := &generator{
		rng: rand.New(rand.NewPCG(uint64(seed), 0x74616c6f7373696d)), // Simulation data, not secrets.
	}

	g.clusterULA = [6]byte{0xfd}
	for i := 1; i < len(g.clusterULA); i++ {
		g.clusterULA[i] = byte(g.rng.IntN(256))
	}

	g.azureSubscription = g.uuid()
	g.gcpProjects = []string{
		fmt.Sprintf("talos-sim-%04d", g.rng.IntN(10000)),
		fmt.Sprintf("talos-edge-%04d", g.rng.IntN(10000)),
	}

	controlPlanes := 1
	if count >= 10 {
		controlPlanes = 3
	}

	machines := make([]Machine, 0, count)

	var round []string

	for i := range count {
		if i%len(Platforms) == 0 {
			round = append(round[:0], Platforms...)
			g.rng.Shuffle(len(round), func(a, b int) { round[a], round[b] = round[b], round[a] })
		}

		machines = append(machines, g.machine(i, round[i%len(Platforms)], i < controlPlanes))
	}

	return machines
}

// region is a platform region with its zones.
type region struct {
	name  string
	zones []string
}

// profile holds the per-platform choices of the generator.
type profile struct {
	link           string
	prefixBits     int
	regions        []region
	instanceTypes  []string
	externalChance float64
	spotChance     float64
}

var profiles = map[string]profile{
	"aws": {
		link: "ens5", prefixBits: 20, externalChance: 0.7, spotChance: 0.3,
		regions: []region{
			{"us-east-1", []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"}},
			{"eu-west-1", []string{"eu-west-1a", "eu-west-1b", "eu-west-1c"}},
			{"ap-southeast-2", []string{"ap-southeast-2a", "ap-southeast-2b", "ap-southeast-2c"}},
		},
		instanceTypes: []string{"m5.large", "c6i.xlarge", "t3.medium", "m6g.large", "r5.2xlarge"},
	},
	"gcp": {
		link: "eth0", prefixBits: 32, externalChance: 0.6, spotChance: 0.3,
		regions: []region{
			{"us-central1", []string{"us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"}},
			{"europe-west4", []string{"europe-west4-a", "europe-west4-b", "europe-west4-c"}},
			{"asia-east1", []string{"asia-east1-a", "asia-east1-b", "asia-east1-c"}},
		},
		instanceTypes: []string{"e2-standard-4", "n2-standard-8", "n2d-highmem-4", "t2d-standard-2", "c3-standard-4"},
	},
	"azure": {
		link: "eth0", prefixBits: 24, externalChance: 0.5, spotChance: 0.3,
		regions: []region{
			{"eastus", []string{"eastus-1", "eastus-2", "eastus-3"}},
			{"westeurope", []string{"westeurope-1", "westeurope-2", "westeurope-3"}},
			{"southeastasia", []string{"southeastasia-1", "southeastasia-2"}},
		},
		instanceTypes: []string{"Standard_D4s_v5", "Standard_B2ms", "Standard_E8s_v5", "Standard_F4s_v2"},
	},
	"hcloud": {
		link: "eth0", prefixBits: 32, externalChance: 1,
		regions: []region{
			{"eu-central", []string{"fsn1-dc14", "nbg1-dc3", "hel1-dc2"}},
			{"us-east", []string{"ash-dc1"}},
			{"us-west", []string{"hil-dc1"}},
		},
		instanceTypes: []string{"cx22", "cpx31", "ccx23", "cax21", "cx42"},
	},
	"openstack": {
		link: "eth0", prefixBits: 24, externalChance: 0.5,
		regions: []region{
			{"RegionOne", []string{"nova", "az-1", "az-2"}},
			{"RegionTwo", []string{"nova", "az-3"}},
		},
		instanceTypes: []string{"m1.large", "m1.xlarge", "c2.medium", "g1.small"},
	},
	"nocloud": {
		link: "eth0", prefixBits: 24, externalChance: 0.2,
		regions: []region{
			{"", []string{""}},
			{"lab-1", []string{"rack-a", "rack-b"}},
			{"lab-2", []string{"rack-c"}},
		},
	},
	"metal": {
		link: "eth0", prefixBits: 24, externalChance: 0.2,
		regions: []region{{"", []string{""}}},
	},
}

// metalVendors are the SMBIOS manufacturer and product names of generated bare metal machines.
var metalVendors = [][2]string{
	{"Supermicro", "SYS-1029P-WTR"},
	{"Dell Inc.", "PowerEdge R650"},
	{"HPE", "ProLiant DL360 Gen10"},
	{"Lenovo", "ThinkSystem SR630 V2"},
}

// generator carries the random source and the fleet-wide choices of one Generate call.
type generator struct {
	rng               *rand.Rand
	clusterULA        [6]byte
	azureSubscription string
	gcpProjects       []string
	public            int
}

func (g *generator) machine(i int, platform string, controlPlane bool) Machine {
	p := profiles[platform]
	reg := p.regions[g.rng.IntN(len(p.regions))]

	m := Machine{
		Name:         fmt.Sprintf("%s-%04d", platform, i),
		ControlPlane: controlPlane,
		Platform:     platform,
		Region:       reg.name,
		Zone:         reg.zones[g.rng.IntN(len(reg.zones))],
		Spot:         g.rng.Float64() < p.spotChance,
		Stage:        "running",
	}

	if len(p.instanceTypes) > 0 {
		m.InstanceType = p.instanceTypes[g.rng.IntN(len(p.instanceTypes))]
	}

	private := g.privateIPv4(i, platform)
	dualStack := g.rng.IntN(3) == 0

	var external netip.Addr
	if g.rng.Float64() < p.externalChance {
		external = g.publicIPv4()
	}

	m.Addresses = []Address{
		{LinkName: "lo", Prefix: netip.MustParsePrefix("127.0.0.1/8"), Scope: "host"},
		{LinkName: "lo", Prefix: netip.MustParsePrefix("::1/128"), Scope: "host"},
		{LinkName: p.link, Prefix: netip.PrefixFrom(private, p.prefixBits), Scope: "global"},
		{LinkName: p.link, Prefix: netip.PrefixFrom(g.linkLocal(), 64), Scope: "link"},
	}
	m.NodeIPs = []netip.Addr{private}

	if dualStack {
		v6 := g.globalIPv6(i, platform)
		m.Addresses = append(m.Addresses, Address{LinkName: p.link, Prefix: netip.PrefixFrom(v6, 64), Scope: "global"})
		m.NodeIPs = append(m.NodeIPs, v6)
	}

	if external.IsValid() {
		m.Addresses = append(m.Addresses, Address{LinkName: "external", Prefix: netip.PrefixFrom(external, 32), Scope: "global"})
	}

	if g.rng.IntN(10) < 3 {
		m.Addresses = append(m.Addresses, Address{LinkName: "kubespan", Prefix: netip.PrefixFrom(g.kubespan(), 64), Scope: "global"})
	}

	g.platformFacts(&m, private, external)

	return m
}

// platformFacts fills the instance ID, provider ID, DNS names, tags and SMBIOS facts of a platform.
//
//nolint:gocyclo,cyclop // One case per platform reads better than a table of closures.
func (g *generator) platformFacts(m *Machine, private, external netip.Addr) {
	dashed := func(a netip.Addr) string { return strings.ReplaceAll(a.String(), ".", "-") }

	switch m.Platform {
	case "aws":
		m.InstanceID = "i-" + g.hex(17)
		m.ProviderID = "aws:///" + m.Zone + "/" + m.InstanceID

		if m.Region == "us-east-1" {
			m.InternalDNS = "ip-" + dashed(private) + ".ec2.internal"
		} else {
			m.InternalDNS = "ip-" + dashed(private) + "." + m.Region + ".compute.internal"
		}

		if external.IsValid() {
			if m.Region == "us-east-1" {
				m.ExternalDNS = "ec2-" + dashed(external) + ".compute-1.amazonaws.com"
			} else {
				m.ExternalDNS = "ec2-" + dashed(external) + "." + m.Region + ".compute.amazonaws.com"
			}
		}

		m.Tags = map[string]string{"Name": m.Name, "kubernetes.io/cluster/talos-sim": "owned"}
		m.System = SystemInfo{
			Manufacturer: "Amazon EC2", ProductName: m.InstanceType, Version: "1.0",
			SerialNumber: "ec2" + g.hex(29), UUID: "ec2" + g.uuid()[3:], WakeUpType: "Power Switch",
		}
	case "gcp":
		project := g.gcpProjects[g.rng.IntN(len(g.gcpProjects))]
		m.InstanceID = fmt.Sprintf("%d", 1_000_000_000_000_000_000+g.rng.Int64N(8_000_000_000_000_000_000))
		m.ProviderID = "gce://" + project + "/" + m.Zone + "/" + m.Name
		m.InternalDNS = m.Name + "." + m.Zone + ".c." + project + ".internal"
		m.Tags = map[string]string{"goog-gke-node": "false", "env": "sim"}
		m.System = SystemInfo{
			Manufacturer: "Google", ProductName: "Google Compute Engine",
			SerialNumber: "GoogleCloud-" + strings.ToUpper(g.hex(32)), UUID: g.uuid(), WakeUpType: "Power Switch",
		}
	case "azure":
		vmID := g.uuid()
		m.InstanceID = vmID
		m.ProviderID = "azure:///subscriptions/" + g.azureSubscription + "/resourceGroups/talos-sim-" + m.Region +
			"/providers/Microsoft.Compute/virtualMachines/" + m.Name
		m.Tags = map[string]string{"cluster": "talos-sim"}
		m.System = SystemInfo{
			Manufacturer: "Microsoft Corporation", ProductName: "Virtual Machine", Version: "7.0",
			SerialNumber: fmt.Sprintf("0000-%04d-%04d-%04d-%04d-%04d-%02d", g.rng.IntN(10000), g.rng.IntN(10000),
				g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(10000), g.rng.IntN(100)),
			UUID: vmID, WakeUpType: "Power Switch",
		}
	case "hcloud":
		m.InstanceID = fmt.Sprintf("%d", 10_000_000+g.rng.IntN(90_000_000))
		m.ProviderID = "hcloud://" + m.InstanceID
		m.System = SystemInfo{
			Manufacturer: "Hetzner", ProductName: "vServer", Version: "20171111",
			SerialNumber: m.InstanceID, UUID: g.uuid(), WakeUpType: "Power Switch",
		}
	case "openstack":
		m.InstanceID = g.uuid()
		m.ProviderID = "openstack:///" + m.InstanceID
		m.System = SystemInfo{
			Manufacturer: "OpenStack Foundation", ProductName: "OpenStack Nova", Version: "27.1.0",
			SerialNumber: m.InstanceID, UUID: m.InstanceID, WakeUpType: "Power Switch",
		}
	case "nocloud":
		m.InstanceID = "iid-" + g.hex(12)

		if g.rng.IntN(2) == 0 {
			m.Domain = "lab.example.net"
		}

		m.System = SystemInfo{
			Manufacturer: "QEMU", ProductName: "Standard PC (Q35 + ICH9, 2009)", Version: "pc-q35-8.2",
			UUID: g.uuid(), WakeUpType: "Power Switch",
		}
	case "metal":
		m.NoPlatformMetadata = g.rng.IntN(2) == 0

		if g.rng.IntN(2) == 0 {
			m.Domain = "dc1.example.org"
		}

		vendor := metalVendors[g.rng.IntN(len(metalVendors))]
		m.System = SystemInfo{
			Manufacturer: vendor[0], ProductName: vendor[1], Version: "1.0",
			SerialNumber: strings.ToUpper(g.hex(10)), UUID: g.uuid(), WakeUpType: "Power Switch", SKUNumber: "SKU-" + g.hex(6),
		}

		// Some machines (VMs without SMBIOS, containers) have no SystemInformation at all.
		if g.rng.IntN(10) == 0 {
			m.System = SystemInfo{}
		}
	}
}

// privateIPv4 returns a unique private address for machine i: 10.<16*platform+hi>.<mid>.<2..251>, where
// the blocks from 10.96 on move up by 64, out of Talos's default Service range 10.96.0.0/12 (ServiceCIDRv4):
// no node has an address there, and the CSR approver refuses it.
func (g *generator) privateIPv4(i int, platform string) netip.Addr {
	n := i + 10

	base := 16 * platformIndex(platform)
	if base >= 96 {
		base += 64
	}

	return netip.AddrFrom4([4]byte{10, byte(base + n/(250*256)), byte((n / 250) % 256), byte(n%250 + 2)})
}

// globalIPv6 returns a global address in a /64 of its own in 2001:db8::/32.
func (g *generator) globalIPv6(i int, platform string) netip.Addr {
	b := [16]byte{0x20, 0x01, 0x0d, 0xb8, 0, byte(platformIndex(platform)), byte(i >> 8), byte(i)}
	g.fillRandom(b[8:])

	return netip.AddrFrom16(b)
}

// linkLocal returns a random fe80::/64 address.
func (g *generator) linkLocal() netip.Addr {
	b := [16]byte{0xfe, 0x80}
	g.fillRandom(b[8:])

	return netip.AddrFrom16(b)
}

// kubespan returns a random address in the fleet's KubeSpan ULA /64.
func (g *generator) kubespan() netip.Addr {
	var b [16]byte

	copy(b[:], g.clusterULA[:])
	g.fillRandom(b[8:])

	return netip.AddrFrom16(b)
}

// publicIPv4 returns the next address from the documentation ranges, wrapping around.
func (g *generator) publicIPv4() netip.Addr {
	ranges := [][3]byte{{203, 0, 113}, {198, 51, 100}, {192, 0, 2}}
	r := ranges[(g.public/254)%len(ranges)]
	host := byte(g.public%254 + 1)
	g.public++

	return netip.AddrFrom4([4]byte{r[0], r[1], r[2], host})
}

func (g *generator) fillRandom(b []byte) {
	for i := range b {
		b[i] = byte(g.rng.IntN(256))
	}

	// An all-zero interface identifier would be the subnet-router anycast address.
	b[len(b)-1] |= 1
}

func (g *generator) hex(n int) string {
	const digits = "0123456789abcdef"

	var sb strings.Builder

	for range n {
		sb.WriteByte(digits[g.rng.IntN(16)])
	}

	return sb.String()
}

func (g *generator) uuid() string {
	h := g.hex(32)

	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

func platformIndex(platform string) int {
	for i, p := range Platforms {
		if p == platform {
			return i
		}
	}

	return len(Platforms)
}

package talos

import (
	"reflect"
	"strings"
	"testing"

	hwpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/hardware"
	netpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/network"
	rtpb "github.com/siderolabs/talos/pkg/machinery/api/resource/definitions/runtime"
	"github.com/stretchr/testify/assert"

	"github.com/talos-ccm/talos-ccm/internal/rules"
	"github.com/talos-ccm/talos-ccm/internal/sharedstrings"
)

// decodedMachine is the PlatformMetadata and SystemInformation of one AWS machine, every string its own copy,
// as each session decodes its machine's.
func decodedMachine(name string) (*rtpb.PlatformMetadataSpec, *hwpb.SystemInformationSpec) {
	platform := &rtpb.PlatformMetadataSpec{
		Platform: strings.Clone("aws"), Region: strings.Clone("eu-west-1"), Zone: strings.Clone("eu-west-1b"),
		InstanceType: strings.Clone("m5.large"), InstanceId: "i-" + name, ProviderId: "aws:///eu-west-1b/i-" + name,
		Hostname: name, Tags: map[string]string{strings.Clone("Name"): name, strings.Clone("team"): strings.Clone("infra")},
	}
	system := &hwpb.SystemInformationSpec{
		Manufacturer: strings.Clone("Amazon EC2"), ProductName: strings.Clone("m5.large"), SerialNumber: "ec2-" + name,
	}

	return platform, system
}

// Two machines' facts hold one copy of the values that repeat from machine to machine (and so do the
// state's copies of them, which share their strings), and each its own of the values that name it.
func TestPlatformFactsShareRepeatedStrings(t *testing.T) {
	t.Parallel()

	pmA, siA := decodedMachine("w1")
	pmB, siB := decodedMachine("w2")
	a := platformFacts(pmA, siA, "10.0.0.1")
	b := platformFacts(pmB, siB, "10.0.0.2")

	for _, name := range []string{"platform", "region", "zone", "instanceType", "manufacturer", "productName"} {
		f := factNamed(t, name)
		assert.True(t, sharedstrings.SameCopy(f.Get(a).String(), f.Get(b).String()), "%s is shared", name)
	}

	for _, name := range []string{"hostname", "instanceID", "providerID", "serialNumber"} {
		f := factNamed(t, name)
		assert.NotEqual(t, f.Get(a).String(), f.Get(b).String(), name)
	}

	for key := range a.GetTags() {
		other := keyOf(b.GetTags(), key)
		assert.True(t, sharedstrings.SameCopy(key, other), "the tag key %s is shared", key)
	}
}

// keyOf returns the key of m equal to key, as m holds it.
func keyOf(m map[string]string, key string) string {
	for k := range m {
		if k == key {
			return k
		}
	}

	return ""
}

// Every repeated fact is a text fact of the facts table read from a Talos resource.
func TestRepeatedFactsAreTextFacts(t *testing.T) {
	t.Parallel()

	for _, name := range repeatedFacts {
		f := factNamed(t, name)
		assert.Equal(t, reflect.String, f.Type().Kind(), name)
		assert.Contains(t, []rules.Source{rules.FromPlatformMetadata, rules.FromSystemInformation}, f.Source, name)
	}
}

// factNamed returns the fact of the facts table named name.
func factNamed(t *testing.T, name string) rules.Fact {
	t.Helper()

	for _, f := range rules.Facts() {
		if f.Name == name {
			return f
		}
	}

	t.Fatalf("no fact %s in the facts table", name)

	return rules.Fact{}
}

// Two machines' sessions hold one copy of a link name.
func TestAddressesShareLinkNames(t *testing.T) {
	t.Parallel()

	a := addressFromSpec(&netpb.AddressStatusSpec{LinkName: strings.Clone("ens5")})
	b := addressFromSpec(&netpb.AddressStatusSpec{LinkName: strings.Clone("ens5")})

	assert.True(t, sharedstrings.SameCopy(a.link, b.link))
}

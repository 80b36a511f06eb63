package kubenames_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talos-ccm/talos-ccm/internal/kubenames"
)

// checks pairs each check with its counterpart in k8s.io/apimachinery, and the values at the edges of its
// rules.
var checks = []struct {
	name        string
	check       func(string) bool
	counterpart func(string) []string
	values      []string
}{
	{
		name: "IsLabelValue", check: kubenames.IsLabelValue, counterpart: validation.IsValidLabelValue,
		values: []string{
			"", "a", "Z", "0", "-", "_", ".", "a-", "-a", "a.", ".a", "_a", "a_", "a-b", "a_b", "a.b", "a--b", "a..b",
			"eu-west-1a", "c5.large", "a b", "a/b", "a:b", "é", "aé", "a\x00", "a\n",
			strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 61) + "a",
		},
	},
	{
		name: "IsDNS1123Subdomain", check: kubenames.IsDNS1123Subdomain, counterpart: validation.IsDNS1123Subdomain,
		values: []string{
			"", "a", "0", "-", ".", "a-", "-a", "a.", ".a", "a-b", "a.b", "a..b", "a-.b", "a.-b", "a--b", "a.b.c",
			"worker-1", "worker-1.example.com", "Worker", "a_b", "a b", "a/b", "é", "a\x00",
			strings.Repeat("a", 253), strings.Repeat("a", 254), strings.Repeat("a.", 126) + "a", strings.Repeat("a", 64),
		},
	},
}

// Each check accepts exactly what its counterpart accepts.
func TestChecks(t *testing.T) {
	t.Parallel()

	for _, c := range checks {
		for _, v := range c.values {
			if want := len(c.counterpart(v)) == 0; c.check(v) != want {
				t.Errorf("%s(%q) = %v, its counterpart says %v", c.name, v, !want, want)
			}
		}
	}
}

func FuzzChecks(f *testing.F) {
	for _, c := range checks {
		for _, v := range c.values {
			f.Add(v)
		}
	}

	f.Fuzz(func(t *testing.T, v string) {
		for _, c := range checks {
			if want := len(c.counterpart(v)) == 0; c.check(v) != want {
				t.Fatalf("%s(%q) = %v, its counterpart says %v", c.name, v, !want, want)
			}
		}
	})
}

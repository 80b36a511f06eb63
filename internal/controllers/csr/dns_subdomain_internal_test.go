package csr

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"
)

// subdomains are names valid and not: the edges of isDNS1123Subdomain's rules.
var subdomains = []string{
	"", "a", "0", "-", ".", "a-", "-a", "a.", ".a", "a-b", "a.b", "a..b", "a-.b", "a.-b", "a--b", "a.b.c",
	"worker-1", "worker-1.example.com", "Worker", "a_b", "a b", "a/b", "é", "a\x00",
	strings.Repeat("a", 253), strings.Repeat("a", 254), strings.Repeat("a.", 126) + "a", strings.Repeat("a", 64),
}

// isDNS1123Subdomain accepts exactly what validation.IsDNS1123Subdomain accepts.
func TestIsDNS1123Subdomain(t *testing.T) {
	t.Parallel()

	for _, name := range subdomains {
		assert.Equal(t, len(validation.IsDNS1123Subdomain(name)) == 0, isDNS1123Subdomain(name), "%q", name)
	}
}

func FuzzIsDNS1123Subdomain(f *testing.F) {
	for _, name := range subdomains {
		f.Add(name)
	}

	f.Fuzz(func(t *testing.T, name string) {
		if want := len(validation.IsDNS1123Subdomain(name)) == 0; isDNS1123Subdomain(name) != want {
			t.Fatalf("isDNS1123Subdomain(%q) = %v, IsDNS1123Subdomain says %v", name, !want, want)
		}
	})
}

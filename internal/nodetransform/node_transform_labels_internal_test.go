package nodetransform

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/util/validation"
)

// labelValues are label values valid and not: the edges of validLabelValue's rules.
var labelValues = []string{
	"", "a", "Z", "0", "-", "_", ".", "a-", "-a", "a.", ".a", "_a", "a_", "a-b", "a_b", "a.b", "a--b", "a..b",
	"eu-west-1a", "metal", "talos", "c5.large", "a b", "a/b", "a:b", "é", "aé", "a\x00", "a\n",
	strings.Repeat("a", 63), strings.Repeat("a", 64), "a" + strings.Repeat("-", 61) + "a", "a" + strings.Repeat("-", 62) + "a",
}

// validLabelValue accepts exactly what validation.IsValidLabelValue accepts.
func TestValidLabelValue(t *testing.T) {
	t.Parallel()

	for _, v := range labelValues {
		assert.Equal(t, len(validation.IsValidLabelValue(v)) == 0, validLabelValue(v), "%q", v)
	}
}

func FuzzValidLabelValue(f *testing.F) {
	for _, v := range labelValues {
		f.Add(v)
	}

	f.Fuzz(func(t *testing.T, v string) {
		if want := len(validation.IsValidLabelValue(v)) == 0; validLabelValue(v) != want {
			t.Fatalf("validLabelValue(%q) = %v, IsValidLabelValue says %v", v, !want, want)
		}
	})
}

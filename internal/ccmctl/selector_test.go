package ccmctl_test

import (
	"testing"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/talos-ccm/talos-ccm/internal/ccmctl"
)

func TestParseSelector(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		selector string
		want     []resource.LabelTerm
		wantErr  string
	}{
		{selector: ""},
		{selector: "  "},
		{selector: "app=web", want: []resource.LabelTerm{{Key: "app", Op: resource.LabelOpEqual, Value: []string{"web"}}}},
		{selector: "app==web", want: []resource.LabelTerm{{Key: "app", Op: resource.LabelOpEqual, Value: []string{"web"}}}},
		{selector: "app=", want: []resource.LabelTerm{{Key: "app", Op: resource.LabelOpEqual, Value: []string{""}}}},
		{selector: "app!=web", want: []resource.LabelTerm{{Key: "app", Op: resource.LabelOpEqual, Value: []string{"web"}, Invert: true}}},
		{selector: "example.com/role", want: []resource.LabelTerm{{Key: "example.com/role", Op: resource.LabelOpExists}}},
		{selector: "!example.com/role", want: []resource.LabelTerm{{Key: "example.com/role", Op: resource.LabelOpExists, Invert: true}}},
		{
			selector: "a=1, b!=2 ,c,!d",
			want: []resource.LabelTerm{
				{Key: "a", Op: resource.LabelOpEqual, Value: []string{"1"}},
				{Key: "b", Op: resource.LabelOpEqual, Value: []string{"2"}, Invert: true},
				{Key: "c", Op: resource.LabelOpExists},
				{Key: "d", Op: resource.LabelOpExists, Invert: true},
			},
		},
		{
			selector: "zone in (a, b),tier notin (db),x=y",
			want: []resource.LabelTerm{
				{Key: "zone", Op: resource.LabelOpIn, Value: []string{"a", "b"}},
				{Key: "tier", Op: resource.LabelOpIn, Value: []string{"db"}, Invert: true},
				{Key: "x", Op: resource.LabelOpEqual, Value: []string{"y"}},
			},
		},
		{selector: "a=1,,b", wantErr: "a requirement has no key"},
		{selector: "=1", wantErr: "a requirement has no key"},
		{selector: "!", wantErr: "a requirement has no key"},
		{selector: "a=b=c", wantErr: `invalid value "b=c" of key "a"`},
		{selector: "!a=b", wantErr: `invalid key "a=b"`},
		{selector: "a b", wantErr: `invalid key "a b"`},
		{selector: "zone in (a,b", wantErr: "unbalanced parentheses"},
		{selector: "zone in a,b)", wantErr: "unbalanced parentheses"},
		{selector: "zone in ((a))", wantErr: "unbalanced parentheses"},
		{selector: "zone in (a,)", wantErr: `the set of key "zone" has an empty value`},
		{selector: "zone in a", wantErr: `invalid key "zone in a"`},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			t.Parallel()

			got, err := ccmctl.ParseSelector(tc.selector)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)

				return
			}

			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Terms)
		})
	}
}

// TestParseSelectorMatches reads selectors as Kubernetes does: a negation also matches the resources
// without the label.
func TestParseSelectorMatches(t *testing.T) {
	t.Parallel()

	labels := func(kv ...string) resource.Labels {
		var l resource.Labels

		for i := 0; i+1 < len(kv); i += 2 {
			l.Set(kv[i], kv[i+1])
		}

		return l
	}

	for _, tc := range []struct {
		selector string
		labels   resource.Labels
		want     bool
	}{
		{selector: "", labels: labels(), want: true},
		{selector: "app=web", labels: labels("app", "web"), want: true},
		{selector: "app=web", labels: labels("app", "db"), want: false},
		{selector: "app!=web", labels: labels(), want: true},
		{selector: "app!=web", labels: labels("app", "web"), want: false},
		{selector: "app", labels: labels("app", ""), want: true},
		{selector: "!app", labels: labels("app", ""), want: false},
		{selector: "!app", labels: labels("other", "x"), want: true},
		{selector: "zone in (a,b)", labels: labels("zone", "b"), want: true},
		{selector: "zone notin (a,b)", labels: labels("zone", "b"), want: false},
		{selector: "zone notin (a,b)", labels: labels(), want: true},
		{selector: "zone in (a,b),app=web", labels: labels("zone", "a", "app", "db"), want: false},
	} {
		t.Run(tc.selector, func(t *testing.T) {
			t.Parallel()

			query, err := ccmctl.ParseSelector(tc.selector)
			require.NoError(t, err)
			assert.Equal(t, tc.want, query.Matches(tc.labels))
		})
	}
}

package csr_test

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	csrctrl "github.com/talos-ccm/talos-ccm/internal/controllers/csr"
	"github.com/talos-ccm/talos-ccm/internal/resources/csr"
)

// readmeRules returns the rules the README's table under "Kubelet serving certificate approval" lists: for
// each number, whether its failure denies (the "when it fails" column starts with "deny"), and the
// section's text.
func readmeRules(t *testing.T) (map[int32]bool, string) {
	t.Helper()

	readme, err := os.ReadFile("../../../README.md")
	require.NoError(t, err)

	_, section, ok := strings.Cut(string(readme), "### Kubelet serving certificate approval\n")
	require.True(t, ok, "README: no section on kubelet serving certificate approval")

	section, _, _ = strings.Cut(section, "\n### ")

	row := regexp.MustCompile(`(?m)^\| (\d+) \| .* \| (deny|wait)\b[^|]* \|$`)
	rules := map[int32]bool{}

	for _, m := range row.FindAllStringSubmatch(section, -1) {
		n, err := strconv.ParseInt(m[1], 10, 32)
		require.NoError(t, err)

		_, dup := rules[int32(n)]
		require.False(t, dup, "README: rule %d is listed twice", n)

		rules[int32(n)] = m[2] == csr.VerdictDeny
	}

	return rules, section
}

// TestChecksTable checks that the approval checks are numbered 1, 2, 3... in the order they run, with
// distinct names, and are exactly the rules the README documents, each denying as the README says.
func TestChecksTable(t *testing.T) {
	t.Parallel()

	checks := csrctrl.Checks()
	require.NotEmpty(t, checks)

	documented, section := readmeRules(t)
	names := map[string]bool{}

	var denyingNumbers []int32

	for i, c := range checks {
		assert.Equal(t, int32(i+1), c.Number, "check %q: the checks are numbered from 1 in the order they run", c.Name)
		assert.Regexp(t, `^[a-z]+(-[a-z]+)*$`, c.Name, "check %d: the name is a short lowercase word", c.Number)
		assert.False(t, names[c.Name], "check %d: the name %q is taken", c.Number, c.Name)
		names[c.Name] = true

		denies, ok := documented[c.Number]
		if assert.True(t, ok, "check %d (%s) is not in the README's table of rules", c.Number, c.Name) {
			assert.Equal(t, denies, c.Denies, "check %d (%s): whether a failure denies differs from the README", c.Number, c.Name)
		}

		if c.Denies {
			denyingNumbers = append(denyingNumbers, c.Number)
		}
	}

	assert.Len(t, documented, len(checks), "the README's table lists rules that are not checks")

	only := regexp.MustCompile(`Only definite violations of rules ([^.]+) deny\.`).FindStringSubmatch(strings.ReplaceAll(section, "\n", " "))
	if assert.NotNil(t, only, "README: no sentence that names the rules that deny") {
		assert.Equal(t, numberList(denyingNumbers), only[1], "README: the rules that deny")
	}
}

// numberList writes numbers as the README does: runs of three or more as "1 to 5", the last joined by "and".
func numberList(numbers []int32) string {
	var parts []string

	for i := 0; i < len(numbers); {
		j := i
		for j+1 < len(numbers) && numbers[j+1] == numbers[j]+1 {
			j++
		}

		switch {
		case j-i >= 2:
			parts = append(parts, fmt.Sprintf("%d to %d", numbers[i], numbers[j]))
		default:
			for _, n := range numbers[i : j+1] {
				parts = append(parts, strconv.Itoa(int(n)))
			}
		}

		i = j + 1
	}

	if len(parts) < 2 {
		return strings.Join(parts, "")
	}

	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}

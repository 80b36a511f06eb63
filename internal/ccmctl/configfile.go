package ccmctl

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/configfile"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// LoadConfigFile reads and validates a config file exactly as talos-ccm does, so that its messages are
// the service's.
func LoadConfigFile(path string) (*specs.ConfigSpec, error) {
	return configfile.Load(path)
}

// ConfigWarning is something of a valid config that its author should look at again.
type ConfigWarning struct {
	// Line is the line of the rule in the file, 1-based; 0 when unknown.
	Line int
	// Rule names the transformation rule, `rule "NAME"` or `rule transformations[INDEX]`.
	Rule    string
	Message string
	// Note marks information that asks for no change (what a protected label key means), printed as
	// "note:" instead of "warning:".
	Note bool
}

// String formats the warning as the config file's errors are formatted, after the file name.
func (w ConfigWarning) String() string {
	var b strings.Builder

	if w.Line > 0 {
		fmt.Fprintf(&b, ":%d", w.Line)
	}

	b.WriteString(": ")

	if w.Rule != "" {
		b.WriteString(w.Rule + ": ")
	}

	if w.Note {
		b.WriteString("note: " + w.Message)
	} else {
		b.WriteString("warning: " + w.Message)
	}

	return b.String()
}

// ConfigWarnings lists what a valid config allows and should not rely on: what the parser accepted with a
// warning (the Talos CCM's spellings, the deprecated allowProtectedLabels) and template calls that look
// written for the argument order of the Talos CCM's documentation; and, as notes, the label keys
// NodeRestriction protects that rules write, with what that means for the workloads that select on them.
func ConfigWarnings(cfg *specs.ConfigSpec) []ConfigWarning {
	var out []ConfigWarning

	for _, w := range cfg.GetWarnings() {
		out = append(out, ConfigWarning{Line: int(w.GetLine()), Rule: w.GetRule(), Message: w.GetMessage()})
	}

	for i, rule := range cfg.GetTransformations() {
		id := fmt.Sprintf("rule transformations[%d]", i)
		if rule.GetName() != "" {
			id = fmt.Sprintf("rule %q", rule.GetName())
		}

		for _, msg := range rules.ProtectedLabelNotes(rule) {
			out = append(out, ConfigWarning{Line: int(rule.GetLine()), Rule: id, Message: msg, Note: true})
		}

		for _, section := range []struct {
			name   string
			values map[string]string
		}{
			{"labels", rule.GetLabels()},
			{"annotations", rule.GetAnnotations()},
			{"taints", rule.GetTaints()},
			{"platformMetadata", rule.GetPlatformMetadata()},
		} {
			for _, key := range slices.Sorted(maps.Keys(section.values)) {
				for _, msg := range rules.ArgumentOrderWarnings(section.values[key]) {
					out = append(out, ConfigWarning{Line: int(rule.GetLine()), Rule: id, Message: fmt.Sprintf("%s[%q]: %s", section.name, key, msg)})
				}
			}
		}
	}

	return out
}

// ValidateConfigFile validates a config file offline and describes a valid one: a line per warning or note
// ("FILE:LINE: rule "NAME": warning: ..."), then a line of summary. Neither makes a config invalid.
func ValidateConfigFile(path string) (string, error) {
	cfg, err := LoadConfigFile(path)
	if err != nil {
		return "", err
	}

	warnings := ConfigWarnings(cfg)
	lines := make([]string, 0, len(warnings)+1)

	for _, w := range warnings {
		lines = append(lines, path+w.String())
	}

	notes := 0

	for _, w := range warnings {
		if w.Note {
			notes++
		}
	}

	line := fmt.Sprintf("%s: valid: %s", path, summary(cfg))
	if n := len(warnings) - notes; n > 0 {
		line += fmt.Sprintf(", %d warning%s", n, plural(n))
	}

	if notes > 0 {
		line += fmt.Sprintf(", %d note%s", notes, plural(notes))
	}

	return strings.Join(append(lines, line), "\n"), nil
}

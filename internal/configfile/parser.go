package configfile

import (
	"cmp"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v4"
	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// maxNodes bounds the YAML nodes visited, aliases expanded: a small file of nested aliases must not make
// the parser walk billions of nodes.
const maxNodes = 200_000

// maxProblems stops the walk of a file that has that many problems.
const maxProblems = 100

// Known keys of each mapping, as documented.
var (
	topKeys         = []string{"global", "transformations", "csrApproval", "loadBalancer"}
	globalKeys      = []string{"clusterName", "preferIPv6", "clusterDomain", "serviceCIDRs"}
	ruleKeys        = []string{"name", "nodeSelector", "labels", "annotations", "taints", "platformMetadata", "allowProtectedLabels", "features"}
	featureKeys     = []string{"publicIPDiscovery"}
	termKeys        = []string{"name", "matchExpressions"}
	requirementKeys = []string{"key", "operator", "values"}
	csrKeys         = []string{"allowedIPPrefixes", "dnsNameRegex", "maxExpirationSeconds"}
)

// unsupportedKeys explain keys that other Talos CCM versions document and talos-ccm rejects.
var unsupportedKeys = map[string]string{
	"endpoints": "Talos API endpoints are not set in the config file: use --talos-endpoints or $TALOS_ENDPOINTS",
}

// upstreamSpellings are keys the Talos CCM documentation spells otherwise than talos-ccm, by mapping, with
// the key they mean: accepted with a warning. The Talos CCM's own parser ignored them (its keys are
// case-sensitive), so a file that relied on them being ignored behaves otherwise here: the warning says so.
var upstreamSpellings = map[string]map[string]string{
	"global": {"PreferIPv6": "preferIPv6"},
}

// parser walks the YAML tree of one file, building the spec and collecting problems.
type parser struct {
	problems []Problem
	warnings []*specs.ConfigWarning
	budget   int
	// rule is the context of the rule being read, for messages.
	rule string
}

func (p *parser) problem(n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}

	p.problems = append(p.problems, Problem{Line: line, Rule: p.rule, Message: fmt.Sprintf(format, args...)})

	// Past this many problems, more would not help anyone: the walk stops.
	if len(p.problems) >= maxProblems {
		p.budget = 0
	}
}

// warn records something of a valid file that its author should look at again.
func (p *parser) warn(n *yaml.Node, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}

	p.warnings = append(p.warnings, &specs.ConfigWarning{Line: int32(min(line, 1<<30)), Rule: p.rule, Message: fmt.Sprintf(format, args...)}) // Bounded by min.
}

// resolve follows aliases and charges the budget; nil means the walk must stop.
func (p *parser) resolve(n *yaml.Node) *yaml.Node {
	for hops := 0; n != nil && n.Kind == yaml.AliasNode; hops++ {
		if hops > 100 {
			p.problem(n, "alias chain too long")

			return nil
		}

		n = n.Alias
	}

	if n == nil {
		return nil
	}

	p.budget--
	if p.budget == 0 {
		p.problem(n, "the document is too complex (more than %d nodes with aliases expanded)", maxNodes)
	}

	if p.budget <= 0 {
		return nil
	}

	return n
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// mapping calls fn for every key of a mapping node, in order, after checking the keys: known ones only
// (with a hint for a near miss), each at most once. A null node is an empty mapping.
func (p *parser) mapping(n *yaml.Node, what string, known []string, fn func(key string, k, v *yaml.Node)) {
	n = p.resolve(n)
	if n == nil || isNull(n) {
		return
	}

	if n.Kind != yaml.MappingNode {
		p.problem(n, "%s must be a mapping", cmp.Or(what, "this"))

		return
	}

	seen := map[string]int{}

	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := p.resolve(n.Content[i]), n.Content[i+1]
		if k == nil {
			return
		}

		if k.Kind != yaml.ScalarNode {
			p.problem(k, "%s: keys must be strings", cmp.Or(what, "mapping"))

			continue
		}

		if k.ShortTag() == "!!merge" {
			p.problem(k, "%s: merge keys (<<) are not supported", cmp.Or(what, "mapping"))

			continue
		}

		key := k.Value

		if line, dup := seen[key]; dup {
			p.problem(k, "%s: key %q is repeated (first on line %d)", cmp.Or(what, "mapping"), key, line)

			continue
		}

		seen[key] = k.Line

		if meant, ok := upstreamSpellings[what][key]; ok && slices.Contains(known, meant) {
			if line, dup := seen[meant]; dup {
				p.problem(k, "%s: %q is %q, already set on line %d", what, key, meant, line)

				continue
			}

			p.warn(k, "%s: %q read as %q, the key talos-ccm documents (the Talos CCM documents %q but ignores it: keys are case-sensitive there)", what, key, meant, key)
			seen[meant] = k.Line
			key = meant
		}

		if known != nil && !slices.Contains(known, key) {
			p.problem(k, "%s", unknownKey(what, key, known))

			continue
		}

		fn(key, k, v)
	}
}

// unknownKey explains an unknown key of the mapping what ("" for the top level and for a rule, whose
// messages already say where they are).
func unknownKey(what, key string, known []string) string {
	if what != "" {
		what += ": "
	}

	if why, ok := unsupportedKeys[key]; ok {
		return fmt.Sprintf("%sunknown key %q: %s", what, key, why)
	}

	for _, k := range known {
		if strings.EqualFold(k, key) {
			return fmt.Sprintf("%sunknown key %q (did you mean %q? keys are case-sensitive)", what, key, k)
		}
	}

	if k := nearKey(key, known); k != "" {
		return fmt.Sprintf("%sunknown key %q (did you mean %q? known: %s)", what, key, k, strings.Join(known, ", "))
	}

	return fmt.Sprintf("%sunknown key %q (known: %s)", what, key, strings.Join(known, ", "))
}

// nearKey returns the known key that key most likely misspells, or "": one a few edits away (at most a
// quarter of its length, and at least two), else one that starts with the same word of six letters or more
// (publicIPPredict for publicIPDiscovery).
func nearKey(key string, known []string) string {
	best, bestDistance := "", -1

	for _, k := range known {
		d := editDistance(strings.ToLower(key), strings.ToLower(k))
		if d <= max(2, len(k)/4) && (bestDistance < 0 || d < bestDistance) {
			best, bestDistance = k, d
		}
	}

	if best != "" {
		return best
	}

	for _, k := range known {
		n := 0
		for n < len(k) && n < len(key) && unicode.ToLower(rune(k[n])) == unicode.ToLower(rune(key[n])) {
			n++
		}

		if n >= 6 {
			return k
		}
	}

	return ""
}

// editDistance is the Levenshtein distance of two short strings (keys).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b))
	}

	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)

	for j := range prev {
		prev[j] = j
	}

	for i := 1; i <= len(a); i++ {
		cur[0] = i

		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}

			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}

		prev, cur = cur, prev
	}

	return prev[len(b)]
}

// sequence calls fn for every item of a sequence node. A null node is an empty sequence.
func (p *parser) sequence(n *yaml.Node, what string, fn func(i int, item *yaml.Node)) {
	n = p.resolve(n)
	if n == nil || isNull(n) {
		return
	}

	if n.Kind != yaml.SequenceNode {
		p.problem(n, "%s must be a list", what)

		return
	}

	for i, item := range n.Content {
		if p.budget <= 0 {
			return
		}

		fn(i, item)
	}
}

// scalar returns the text of a scalar node; null is "". ok is false (and a problem recorded) otherwise.
func (p *parser) scalar(n *yaml.Node, what string) (string, *yaml.Node, bool) {
	n = p.resolve(n)
	if n == nil {
		return "", nil, false
	}

	if n.Kind != yaml.ScalarNode {
		p.problem(n, "%s must be a string", what)

		return "", n, false
	}

	if isNull(n) {
		return "", n, true
	}

	return n.Value, n, true
}

func (p *parser) boolean(n *yaml.Node, what string) (bool, bool) {
	n = p.resolve(n)
	if n == nil {
		return false, false
	}

	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
		p.problem(n, "%s must be true or false", what)

		return false, false
	}

	b, err := strconv.ParseBool(strings.ToLower(n.Value))
	if err != nil {
		p.problem(n, "%s must be true or false", what)

		return false, false
	}

	return b, true
}

func (p *parser) stringList(n *yaml.Node, what string) []string {
	var out []string

	p.sequence(n, what, func(i int, item *yaml.Node) {
		if s, _, ok := p.scalar(item, fmt.Sprintf("%s[%d]", what, i)); ok {
			out = append(out, s)
		}
	})

	return out
}

// stringMap reads a mapping of strings; check validates each entry (key node, value node).
func (p *parser) stringMap(n *yaml.Node, what string, check func(key, value string, k, v *yaml.Node)) map[string]string {
	out := map[string]string{}

	p.mapping(n, what, nil, func(key string, k, v *yaml.Node) {
		value, vn, ok := p.scalar(v, fmt.Sprintf("%s[%q]", what, key))
		if !ok {
			return
		}

		out[key] = value

		check(key, value, k, vn)
	})

	if len(out) == 0 {
		return nil
	}

	return out
}

func (p *parser) config(doc *yaml.Node, spec *specs.ConfigSpec) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return
	}

	p.mapping(doc.Content[0], "", topKeys, func(key string, _, v *yaml.Node) {
		switch key {
		case "global":
			p.global(v, spec)
		case "transformations":
			p.transformations(v, spec)
		case "csrApproval":
			spec.CsrApproval = p.csrApproval(v)
		case "loadBalancer":
			spec.LoadBalancer = p.loadBalancer(v)
		}
	})
}

func (p *parser) global(n *yaml.Node, spec *specs.ConfigSpec) {
	p.mapping(n, "global", globalKeys, func(key string, _, v *yaml.Node) {
		switch key {
		case "clusterName":
			name, vn, ok := p.scalar(v, "global.clusterName")
			if !ok {
				return
			}

			if errs := content.IsLabelValue(name); len(errs) > 0 {
				p.problem(vn, "global.clusterName %q is not a valid label value: %s", name, strings.Join(errs, "; "))

				return
			}

			spec.ClusterName = name
		case "preferIPv6":
			spec.PreferIpv6, _ = p.boolean(v, "global.preferIPv6")
		case "clusterDomain":
			domain, vn, ok := p.scalar(v, "global.clusterDomain")
			if !ok {
				return
			}

			domain = strings.TrimSuffix(domain, ".")

			if errs := content.IsDNS1123Subdomain(domain); len(errs) > 0 {
				p.problem(vn, "global.clusterDomain %q is not a DNS name: %s", domain, strings.Join(errs, "; "))

				return
			}

			spec.ClusterDomain = domain
		case "serviceCIDRs":
			spec.ServiceCidrs = p.prefixes(v, "global.serviceCIDRs")
		}
	})
}

// prefixes reads a list of CIDRs, normalized to their network address.
func (p *parser) prefixes(n *yaml.Node, what string) []string {
	var out []string

	p.sequence(n, what, func(i int, item *yaml.Node) {
		s, vn, ok := p.scalar(item, fmt.Sprintf("%s[%d]", what, i))
		if !ok {
			return
		}

		prefix, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			p.problem(vn, "%s[%d]: invalid CIDR %q: %v", what, i, s, err)

			return
		}

		out = append(out, prefix.Masked().String())
	})

	return out
}

func (p *parser) csrApproval(n *yaml.Node) *specs.CSRApprovalConfig {
	out := &specs.CSRApprovalConfig{}

	p.mapping(n, "csrApproval", csrKeys, func(key string, _, v *yaml.Node) {
		switch key {
		case "allowedIPPrefixes":
			out.AllowedIpPrefixes = p.prefixes(v, "csrApproval.allowedIPPrefixes")
		case "dnsNameRegex":
			re, vn, ok := p.scalar(v, "csrApproval.dnsNameRegex")
			if !ok {
				return
			}

			if _, err := regexp.Compile(re); err != nil {
				p.problem(vn, "csrApproval.dnsNameRegex: invalid regular expression %q: %v", re, err)

				return
			}

			out.DnsNameRegex = re
		case "maxExpirationSeconds":
			vn := p.resolve(v)
			if vn == nil {
				return
			}

			var seconds int64

			if vn.Kind != yaml.ScalarNode || vn.ShortTag() != "!!int" || vn.Decode(&seconds) != nil || seconds < 0 {
				p.problem(vn, "csrApproval.maxExpirationSeconds must be a whole number of seconds, 0 or more")

				return
			}

			out.MaxExpirationSeconds = seconds
		}
	})

	return out
}

func (p *parser) transformations(n *yaml.Node, spec *specs.ConfigSpec) {
	names := map[string]int{}

	p.sequence(n, "transformations", func(i int, item *yaml.Node) {
		item = p.resolve(item)
		if item == nil {
			return
		}

		rule := &specs.TransformationRule{Line: int32(min(item.Line, 1<<30))} //nolint:gosec // Bounded.

		// The name comes first, whatever its place: every message about the rule carries it.
		p.rule = fmt.Sprintf("rule transformations[%d]", i)

		if item.Kind == yaml.MappingNode {
			for j := 0; j+1 < len(item.Content); j += 2 {
				if item.Content[j].Value == "name" {
					if name, vn, ok := p.scalar(item.Content[j+1], "name"); ok && name != "" {
						rule.Name = name
						p.rule = fmt.Sprintf("rule %q", name)

						if line, dup := names[name]; dup {
							p.problem(vn, "the name is already used by the rule on line %d", line)
						}

						names[name] = vn.Line
					}
				}
			}
		}

		p.ruleBody(item, rule)
		p.rule = ""

		spec.Transformations = append(spec.Transformations, rule)
	})
}

func (p *parser) ruleBody(n *yaml.Node, rule *specs.TransformationRule) {
	if isNull(n) {
		p.problem(n, "the rule is empty")

		return
	}

	p.mapping(n, "", ruleKeys, func(key string, k, v *yaml.Node) {
		switch key {
		case "allowProtectedLabels":
			// Rules once needed it to write the label keys NodeRestriction protects; they may write any key
			// now, and files written for that time load as they are.
			p.sequence(v, "allowProtectedLabels", func(i int, item *yaml.Node) {
				p.scalar(item, fmt.Sprintf("allowProtectedLabels[%d]", i))
			})
			p.warn(k, "allowProtectedLabels is deprecated and ignored: rules may write any label key "+
				"(ccmctl config validate says which keys NodeRestriction protects and what that means)")
		case "nodeSelector":
			p.sequence(v, "nodeSelector", func(i int, item *yaml.Node) {
				rule.NodeSelector = append(rule.NodeSelector, p.term(item, fmt.Sprintf("nodeSelector[%d]", i)))
			})
		case "labels":
			rule.Labels = p.stringMap(v, "labels", func(key, value string, k, vn *yaml.Node) {
				p.check(k, "labels", key, rules.ValidateLabelKey(key))
				p.check(vn, "labels", key, rules.ValidateLabelValue(value))
			})
		case "annotations":
			rule.Annotations = p.stringMap(v, "annotations", func(key, value string, k, vn *yaml.Node) {
				p.check(k, "annotations", key, rules.ValidateAnnotationKey(key))
				p.check(vn, "annotations", key, rules.ValidateTemplate(value))
			})
		case "taints":
			rule.Taints = p.stringMap(v, "taints", func(key, value string, k, vn *yaml.Node) {
				p.check(k, "taints", key, rules.ValidateTaintKey(key))
				p.check(vn, "taints", key, rules.ValidateTaintValue(value))
			})
		case "features":
			rule.Features = p.features(v)
		case "platformMetadata":
			canonical := map[string]int{}

			rule.PlatformMetadata = p.stringMap(v, "platformMetadata", func(key, value string, k, vn *yaml.Node) {
				name, err := rules.CanonicalOverrideKey(key)
				if err != nil {
					p.check(k, "platformMetadata", key, err)

					return
				}

				if line, dup := canonical[name]; dup {
					p.problem(k, "platformMetadata[%q]: %s is already overridden on line %d (keys are case-insensitive)", key, name, line)
				}

				canonical[name] = k.Line

				p.check(vn, "platformMetadata", key, rules.ValidateOverrideValue(key, value))
			})
		}
	})

	if p.budget > 0 && len(rule.Labels)+len(rule.Annotations)+len(rule.Taints)+len(rule.PlatformMetadata) == 0 &&
		!rule.GetFeatures().GetPublicIpDiscovery() && !p.hasProblemsOnRule() {
		p.problem(n, "the rule sets nothing: give it labels, annotations, taints, platformMetadata or features")
	}
}

// features reads a rule's feature flags.
func (p *parser) features(n *yaml.Node) *specs.TransformationFeatures {
	out := &specs.TransformationFeatures{}

	p.mapping(n, "features", featureKeys, func(key string, _, v *yaml.Node) {
		if key == "publicIPDiscovery" {
			out.PublicIpDiscovery, _ = p.boolean(v, "features.publicIPDiscovery")
		}
	})

	return out
}

func (p *parser) hasProblemsOnRule() bool {
	return slices.ContainsFunc(p.problems, func(pr Problem) bool { return pr.Rule == p.rule })
}

func (p *parser) check(n *yaml.Node, section, key string, err error) {
	if err != nil {
		p.problem(n, "%s[%q]: %v", section, key, err)
	}
}

func (p *parser) term(n *yaml.Node, what string) *specs.NodeSelectorTerm {
	term := &specs.NodeSelectorTerm{}

	p.mapping(n, what, termKeys, func(key string, _, v *yaml.Node) {
		switch key {
		case "name":
			term.Name, _, _ = p.scalar(v, what+".name")
		case "matchExpressions":
			p.sequence(v, what+".matchExpressions", func(i int, item *yaml.Node) {
				term.MatchExpressions = append(term.MatchExpressions, p.requirement(item, fmt.Sprintf("%s.matchExpressions[%d]", what, i)))
			})
		}
	})

	if n = p.resolve(n); n != nil && len(term.GetMatchExpressions()) == 0 {
		p.problem(n, "%s has no matchExpressions: it would select no node (leave nodeSelector out to select every node)", what)
	}

	return term
}

func (p *parser) requirement(n *yaml.Node, what string) *specs.NodeSelectorRequirement {
	req := &specs.NodeSelectorRequirement{}
	fields := map[string]*yaml.Node{}

	p.mapping(n, what, requirementKeys, func(key string, k, v *yaml.Node) {
		fields[key] = k

		switch key {
		case "key":
			req.Key, _, _ = p.scalar(v, what+".key")
		case "operator":
			req.Operator, _, _ = p.scalar(v, what+".operator")
		case "values":
			req.Values = p.stringList(v, what+".values")
		}
	})

	n = p.resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return req
	}

	for _, required := range []string{"key", "operator"} {
		if _, ok := fields[required]; !ok {
			p.problem(n, "%s: %s is missing", what, required)

			return req
		}
	}

	// Point at the line of what is wrong: the key, the operator or the values.
	at := fields["values"]

	switch {
	case rules.ValidateFactKey(req.GetKey()) != nil:
		at = fields["key"]
	case !slices.Contains(rules.Operators, req.GetOperator()) || at == nil:
		at = fields["operator"]
	}

	if err := rules.ValidateRequirement(req); err != nil {
		p.problem(at, "%s: %v", what, err)
	}

	return req
}

// Package rules is the transformation-rule language of the config file's `transformations`: the facts a
// selector can test (the facts table, Facts, which the Talos source and the facts adapter read too), its
// operators, the templates of label, annotation, taint and platformMetadata values, their validation, and
// their evaluation on one machine's facts (Apply). It is pure and imports no
// controller, so that the config parser, ccmctl and the NodeTransform controller share one definition.
package rules

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/kubekeys"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// Transformation rules (the `transformations` of the config file) add labels, annotations and taints to
// the Nodes they select, and override platform metadata facts. Rules apply in order, every matching rule
// applies, later keys win, and a rule sees the facts as the rules before it left them. Everything here is
// a pure function of the rules and the machine's facts.

// Selector operators.
const (
	OpIn           = "In"
	OpNotIn        = "NotIn"
	OpExists       = "Exists"
	OpDoesNotExist = "DoesNotExist"
	OpGt           = "Gt"
	OpLt           = "Lt"
	OpRegexp       = "Regexp"
)

// Operators lists the selector operators.
var Operators = []string{OpIn, OpNotIn, OpExists, OpDoesNotExist, OpGt, OpLt, OpRegexp}

// Taint effects a rule may set.
var taintEffects = []string{"NoSchedule", "PreferNoSchedule", "NoExecute"}

// Keys rules may not use: the namespace of the Kubernetes node lifecycle's taints (node.kubernetes.io/not-ready,
// unreachable...: the kubelet and kube-controller-manager set and remove them, and NoExecute ones evict
// pods), the two taints talos-ccm itself sets and removes (a rule that set them would fight talos-ccm), and
// talos-ccm's own bookkeeping annotations. The rest of node.cloudprovider.kubernetes.io/ is open to rules,
// as in the Talos CCM, whose own examples taint node.cloudprovider.kubernetes.io/storage-type.
var (
	reservedTaintPrefixes      = []string{kubekeys.TaintPrefixNodeLifecycle}
	reservedTaintKeys          = []string{kubekeys.TaintUninitialized, kubekeys.TaintShutdown}
	reservedAnnotationPrefixes = []string{kubekeys.AnnotationPrefixOwn}
)

// tagFactPrefix selects one tag of PlatformMetadata: tags.Name is the tag "Name".
const tagFactPrefix = "tags."

// FactNames lists the selector fact names as documented (tags.KEY stands for every tag).
func FactNames() []string {
	names := make([]string, 0, len(factTable))

	var tags []string

	for _, f := range factTable {
		if f.IsTags() {
			tags = append(tags, f.Name+".KEY")

			continue
		}

		names = append(names, f.Name)
	}

	slices.Sort(names)

	return append(names, tags...)
}

// OverridableFacts lists the facts a rule's platformMetadata may override.
func OverridableFacts() []string {
	var names []string

	for _, f := range factTable {
		if f.overridable() {
			names = append(names, f.Name)
		}
	}

	slices.Sort(names)

	return names
}

// lookupFact returns the value of a fact of pm by its case-insensitive name; ok is false when the machine
// lacks the fact (an empty value, or a missing tag).
func lookupFact(pm *specs.PlatformMetadataSpec, key string) (value string, ok bool) {
	if strings.HasPrefix(strings.ToLower(key), tagFactPrefix) {
		value, ok = pm.GetTags()[key[len(tagFactPrefix):]]

		return value, ok && value != ""
	}

	f, known := selectorFacts[strings.ToLower(key)]
	if !known {
		return "", false
	}

	value = f.text(pm)

	return value, value != ""
}

// ValidateFactKey checks a selector key: a fact name (case-insensitive) or tags.KEY.
func ValidateFactKey(key string) error {
	if strings.HasPrefix(strings.ToLower(key), tagFactPrefix) {
		if len(key) == len(tagFactPrefix) {
			return fmt.Errorf("key %q names no tag (tags.KEY)", key)
		}

		return nil
	}

	if _, ok := selectorFacts[strings.ToLower(key)]; !ok {
		return fmt.Errorf("unknown fact key %q (known, case-insensitive: %s)", key, strings.Join(FactNames(), ", "))
	}

	return nil
}

// overrideFact returns the fact a platformMetadata key names (case-insensitive, so the Talos Go field names
// of the Talos CCM documentation, InstanceType or ProviderID, are accepted), or why it cannot be overridden.
func overrideFact(key string) (Fact, error) {
	f, ok := selectorFacts[strings.ToLower(key)]

	switch {
	case !ok:
		return Fact{}, fmt.Errorf("unknown platformMetadata key %q (known, case-insensitive: %s)", key, strings.Join(OverridableFacts(), ", "))
	case !f.overridable():
		return Fact{}, fmt.Errorf("platformMetadata key %q cannot be overridden: %s (overridable: %s)", key, f.Fixed, strings.Join(OverridableFacts(), ", "))
	}

	return f, nil
}

// CanonicalOverrideKey returns the documented name of a platformMetadata key (case-insensitive, so the
// Talos Go field names of the Talos CCM documentation, InstanceType or ProviderID, are accepted), or why it
// cannot be overridden.
func CanonicalOverrideKey(key string) (string, error) {
	f, err := overrideFact(key)

	return f.Name, err
}

// ValidateOverrideValue checks the value of a platformMetadata override: its template and, when it has no
// template action, the value itself.
func ValidateOverrideValue(key, value string) error {
	f, err := overrideFact(key)
	if err != nil {
		return err
	}

	if err = ValidateTemplate(value); err != nil {
		return err
	}

	if !isTemplated(value) {
		_, err = f.parse(strings.TrimSpace(value))
	}

	return err
}

// ValidateRequirement checks a selector expression: a known fact, a known operator (case-sensitive, as in
// Kubernetes) and the number of values it takes: In and NotIn one or more, Exists and DoesNotExist none, Gt
// and Lt one integer, Regexp one Go regular expression.
func ValidateRequirement(req *specs.NodeSelectorRequirement) error {
	if err := ValidateFactKey(req.GetKey()); err != nil {
		return err
	}

	op, values := req.GetOperator(), req.GetValues()

	switch op {
	case OpIn, OpNotIn:
		if len(values) == 0 {
			return fmt.Errorf("operator %s needs at least one value", op)
		}
	case OpExists, OpDoesNotExist:
		if len(values) != 0 {
			return fmt.Errorf("operator %s takes no values, got %d", op, len(values))
		}
	case OpGt, OpLt:
		if len(values) != 1 {
			return fmt.Errorf("operator %s needs exactly one integer value, got %d values", op, len(values))
		}

		if _, err := strconv.ParseInt(values[0], 10, 64); err != nil {
			return fmt.Errorf("operator %s needs an integer value, not %q", op, values[0])
		}
	case OpRegexp:
		if len(values) != 1 {
			return fmt.Errorf("operator %s needs exactly one regular expression, got %d values", op, len(values))
		}

		if _, err := compileRegexp(values[0]); err != nil {
			return err
		}
	default:
		for _, known := range Operators {
			if strings.EqualFold(known, op) {
				return fmt.Errorf("unknown operator %q (did you mean %s?)", op, known)
			}
		}

		return fmt.Errorf("unknown operator %q (known: %s)", op, strings.Join(Operators, ", "))
	}

	return nil
}

// matchRequirement evaluates one selector expression on the facts. A node lacking the fact matches NotIn
// and DoesNotExist only, as in Kubernetes; Gt and Lt match only integer facts.
func matchRequirement(req *specs.NodeSelectorRequirement, pm *specs.PlatformMetadataSpec) (bool, error) {
	if err := ValidateRequirement(req); err != nil {
		return false, err
	}

	value, ok := lookupFact(pm, req.GetKey())

	switch req.GetOperator() {
	case OpIn:
		return ok && slices.Contains(req.GetValues(), value), nil
	case OpNotIn:
		return !ok || !slices.Contains(req.GetValues(), value), nil
	case OpExists:
		return ok, nil
	case OpDoesNotExist:
		return !ok, nil
	case OpGt, OpLt:
		if !ok {
			return false, nil
		}

		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return false, nil //nolint:nilerr // A fact that is not an integer is not greater or less than one.
		}

		limit, _ := strconv.ParseInt(req.GetValues()[0], 10, 64) // Checked by ValidateRequirement.

		if req.GetOperator() == OpGt {
			return n > limit, nil
		}

		return n < limit, nil
	default: // OpRegexp
		re, err := compileRegexp(req.GetValues()[0])
		if err != nil {
			return false, err
		}

		return ok && re.MatchString(value), nil
	}
}

// matchSelector evaluates a rule's nodeSelector: terms are ORed, expressions within a term ANDed, no terms
// select every node, and a term without expressions selects none.
func matchSelector(terms []*specs.NodeSelectorTerm, pm *specs.PlatformMetadataSpec) (bool, error) {
	if len(terms) == 0 {
		return true, nil
	}

	for i, term := range terms {
		if len(term.GetMatchExpressions()) == 0 {
			continue
		}

		matched := true

		for j, req := range term.GetMatchExpressions() {
			ok, err := matchRequirement(req, pm)
			if err != nil {
				return false, fmt.Errorf("nodeSelector[%d].matchExpressions[%d]: %w", i, j, err)
			}

			if !ok {
				matched = false

				break
			}
		}

		if matched {
			return true, nil
		}
	}

	return false, nil
}

// ValidateLabelKey checks a label key (a qualified name, optionally prefixed by a DNS subdomain).
func ValidateLabelKey(key string) error {
	if errs := content.IsLabelKey(key); len(errs) > 0 {
		return fmt.Errorf("invalid label key %q: %s", key, strings.Join(errs, "; "))
	}

	return nil
}

// ValidateLabelValue checks a label value template and, when it has no template action, the value.
func ValidateLabelValue(value string) error {
	if err := ValidateTemplate(value); err != nil {
		return err
	}

	if !isTemplated(value) {
		return checkLabelValue(value)
	}

	return nil
}

func checkLabelValue(value string) error {
	if errs := content.IsLabelValue(value); len(errs) > 0 {
		return fmt.Errorf("invalid label value %q: %s", value, strings.Join(errs, "; "))
	}

	return nil
}

// ValidateAnnotationKey checks an annotation key; keys under tccm.dev/ are talos-ccm's own.
func ValidateAnnotationKey(key string) error {
	if errs := content.IsLabelKey(strings.ToLower(key)); len(errs) > 0 {
		return fmt.Errorf("invalid annotation key %q: %s", key, strings.Join(errs, "; "))
	}

	for _, prefix := range reservedAnnotationPrefixes {
		if strings.HasPrefix(key, prefix) {
			return fmt.Errorf("annotation key %q is reserved: keys under %s belong to talos-ccm", key, prefix)
		}
	}

	return nil
}

// ValidateTaintKey checks a taint key; the node.kubernetes.io/ namespace belongs to the node lifecycle, and
// the uninitialized and shutdown taints to talos-ccm.
func ValidateTaintKey(key string) error {
	if errs := content.IsLabelKey(key); len(errs) > 0 {
		return fmt.Errorf("invalid taint key %q: %s", key, strings.Join(errs, "; "))
	}

	if slices.Contains(reservedTaintKeys, key) {
		return fmt.Errorf("taint key %q is reserved: talos-ccm sets and removes it itself", key)
	}

	for _, prefix := range reservedTaintPrefixes {
		if strings.HasPrefix(key, prefix) {
			return fmt.Errorf("taint key %q is reserved: taints under %s belong to the Kubernetes node lifecycle", key, prefix)
		}
	}

	return nil
}

// ValidateTaintValue checks a taint value template and, when it has no template action, the value:
// "value:Effect" or "Effect".
func ValidateTaintValue(value string) error {
	if err := ValidateTemplate(value); err != nil {
		return err
	}

	if !isTemplated(value) {
		_, err := parseTaint("", value)

		return err
	}

	return nil
}

// parseTaint parses a taint value of the config format, "value:Effect" or "Effect".
func parseTaint(key, spec string) (*specs.Taint, error) {
	parts := strings.Split(spec, ":")
	taint := &specs.Taint{Key: key}

	switch len(parts) {
	case 1:
		taint.Effect = parts[0]
	case 2:
		taint.Value, taint.Effect = parts[0], parts[1]
	default:
		return nil, fmt.Errorf("invalid taint %q: want \"value:Effect\" or \"Effect\"", spec)
	}

	if !slices.Contains(taintEffects, taint.Effect) {
		return nil, fmt.Errorf("invalid taint %q: effect %q is not one of %s", spec, taint.Effect, strings.Join(taintEffects, ", "))
	}

	if errs := content.IsLabelValue(taint.Value); len(errs) > 0 {
		return nil, fmt.Errorf("invalid taint %q: value %q: %s", spec, taint.Value, strings.Join(errs, "; "))
	}

	return taint, nil
}

// RuleID names a rule in messages and origins: its name, or transformations[INDEX] without one.
func RuleID(index int, rule *specs.TransformationRule) string {
	if name := rule.GetName(); name != "" {
		return name
	}

	return fmt.Sprintf("transformations[%d]", index)
}

// Result is what the transformation rules give one machine.
type Result struct {
	// Facts are the machine's facts after every platformMetadata override.
	Facts       *specs.PlatformMetadataSpec
	Labels      map[string]string
	Annotations map[string]string
	Taints      map[string]*specs.Taint
	// Origins maps "label/KEY", "annotation/KEY", "taint/KEY" and "platformMetadata/FACT" to the rule that
	// produced them.
	Origins map[string]string
	Matched []string
	Skipped []*specs.SkippedRule
	// PublicIPDiscovery names the last matching rule that turned features.publicIPDiscovery on, or is "".
	PublicIPDiscovery string
}

// ruleOutput is the rendered output of one rule for one machine, applied only when all of it is valid.
type ruleOutput struct {
	labels      map[string]string
	annotations map[string]string
	taints      map[string]*specs.Taint
	// overrides are the facts a rule's platformMetadata overrides, by name, with their new values.
	overrides map[string]override
}

// override is a fact a rule overrides and its new value.
type override struct {
	fact  Fact
	value reflect.Value
}

// Apply evaluates the rules in order on the machine's facts pm, which it does not modify.
func Apply(rules []*specs.TransformationRule, pm *specs.PlatformMetadataSpec) Result {
	res := Result{
		Facts:       pm.CloneVT(),
		Labels:      map[string]string{},
		Annotations: map[string]string{},
		Taints:      map[string]*specs.Taint{},
		Origins:     map[string]string{},
	}

	for i, rule := range rules {
		id := RuleID(i, rule)

		matched, err := matchSelector(rule.GetNodeSelector(), res.Facts)
		if err != nil {
			res.Skipped = append(res.Skipped, &specs.SkippedRule{Rule: id, Reason: err.Error()})

			continue
		}

		if !matched {
			continue
		}

		out, err := renderRule(rule, res.Facts)
		if err != nil {
			res.Skipped = append(res.Skipped, &specs.SkippedRule{Rule: id, Reason: err.Error()})

			continue
		}

		origin := "rule " + id
		res.Matched = append(res.Matched, id)

		for k, v := range out.labels {
			res.Labels[k] = v
			res.Origins[node.OriginKey(node.OriginKindLabel, k)] = origin
		}

		for k, v := range out.annotations {
			res.Annotations[k] = v
			res.Origins[node.OriginKey(node.OriginKindAnnotation, k)] = origin
		}

		for k, t := range out.taints {
			res.Taints[k] = t
			res.Origins[node.OriginKey(node.OriginKindTaint, k)] = origin
		}

		if rule.GetFeatures().GetPublicIpDiscovery() {
			res.PublicIPDiscovery = origin
		}

		// Validated by renderRule: the overrides apply as a whole.
		for name, o := range out.overrides {
			o.fact.Set(res.Facts, o.value)
			res.Origins[node.OriginKey(node.OriginKindPlatformMetadata, name)] = origin
		}
	}

	return res
}

// renderRule renders every output of a matching rule on the facts, and checks it: the first problem
// found in each output is reported, and any problem leaves the whole rule out for this machine.
func renderRule(rule *specs.TransformationRule, pm *specs.PlatformMetadataSpec) (ruleOutput, error) {
	data := newTemplateFacts(pm)
	out := ruleOutput{
		labels:      map[string]string{},
		annotations: map[string]string{},
		taints:      map[string]*specs.Taint{},
		overrides:   map[string]override{},
	}

	var errs []error

	for _, k := range slices.Sorted(maps.Keys(rule.GetLabels())) {
		// Any valid key may be written, protected ones too (see IsProtectedLabel): the rule is the
		// operator's and its facts are the machine's Talos API's.
		v, err := renderTemplate(rule.GetLabels()[k], data)
		if err == nil {
			err = errors.Join(ValidateLabelKey(k), checkLabelValue(v))
		}

		if err != nil {
			errs = append(errs, fmt.Errorf("label %q: %w", k, err))

			continue
		}

		out.labels[k] = v
	}

	for _, k := range slices.Sorted(maps.Keys(rule.GetAnnotations())) {
		v, err := renderTemplate(rule.GetAnnotations()[k], data)
		if err == nil {
			err = ValidateAnnotationKey(k)
		}

		if err != nil {
			errs = append(errs, fmt.Errorf("annotation %q: %w", k, err))

			continue
		}

		out.annotations[k] = v
	}

	for _, k := range slices.Sorted(maps.Keys(rule.GetTaints())) {
		var taint *specs.Taint

		v, err := renderTemplate(rule.GetTaints()[k], data)
		if err == nil {
			err = ValidateTaintKey(k)
		}

		if err == nil {
			taint, err = parseTaint(k, v)
		}

		if err != nil {
			errs = append(errs, fmt.Errorf("taint %q: %w", k, err))

			continue
		}

		out.taints[k] = taint
	}

	for _, k := range slices.Sorted(maps.Keys(rule.GetPlatformMetadata())) {
		f, err := overrideFact(k)

		var (
			text  string
			value reflect.Value
		)

		if err == nil {
			text, err = renderTemplate(rule.GetPlatformMetadata()[k], data)
		}

		if err == nil {
			value, err = f.parse(strings.TrimSpace(text))
		}

		if err == nil {
			if _, dup := out.overrides[f.Name]; dup {
				err = fmt.Errorf("%s is overridden twice in the same rule", f.Name)
			}
		}

		if err != nil {
			errs = append(errs, fmt.Errorf("platformMetadata %q: %w", k, err))

			continue
		}

		out.overrides[f.Name] = override{fact: f, value: value}
	}

	if err := errors.Join(errs...); err != nil {
		return ruleOutput{}, errors.New(strings.ReplaceAll(err.Error(), "\n", "; "))
	}

	return out, nil
}

package ccmctl

import (
	"fmt"
	"strings"

	"github.com/cosi-project/runtime/pkg/resource"
)

// ParseSelector reads a label selector in kubectl's syntax: requirements separated by commas, each
// key=value (or key==value), key!=value, key (the label is set), !key (it is not), key in (a,b) or
// key notin (a,b). As in Kubernetes, key!=value and notin also match resources without the label. The
// empty selector matches everything.
func ParseSelector(s string) (resource.LabelQuery, error) {
	var query resource.LabelQuery

	parts, err := splitRequirements(s)
	if err != nil {
		return query, err
	}

	for _, part := range parts {
		term, termErr := parseRequirement(part)
		if termErr != nil {
			return query, fmt.Errorf("invalid label selector %q: %w", s, termErr)
		}

		query.Terms = append(query.Terms, term)
	}

	return query, nil
}

// splitRequirements splits a selector at the commas that are not inside the parentheses of a set.
func splitRequirements(s string) ([]string, error) {
	var (
		parts []string
		depth int
		start int
	)

	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				parts = append(parts, s[start:i])
				start = i + 1
			}
		}

		if depth < 0 || depth > 1 {
			return nil, fmt.Errorf("invalid label selector %q: unbalanced parentheses", s)
		}
	}

	if depth != 0 {
		return nil, fmt.Errorf("invalid label selector %q: unbalanced parentheses", s)
	}

	if strings.TrimSpace(s) == "" {
		return nil, nil
	}

	return append(parts, s[start:]), nil
}

func parseRequirement(s string) (resource.LabelTerm, error) {
	s = strings.TrimSpace(s)

	if key, ok := strings.CutPrefix(s, "!"); ok {
		return term(key, resource.LabelOpExists, nil, true)
	}

	for _, op := range []struct {
		sep    string
		op     resource.LabelOp
		invert bool
	}{
		// Longest first, so that "!=" and "==" are not read as "=".
		{"!=", resource.LabelOpEqual, true},
		{"==", resource.LabelOpEqual, false},
		{"=", resource.LabelOpEqual, false},
	} {
		if key, value, ok := strings.Cut(s, op.sep); ok {
			return term(key, op.op, []string{strings.TrimSpace(value)}, op.invert)
		}
	}

	if key, values, ok := cutSet(s, "notin"); ok {
		return term(key, resource.LabelOpIn, values, true)
	}

	if key, values, ok := cutSet(s, "in"); ok {
		return term(key, resource.LabelOpIn, values, false)
	}

	return term(s, resource.LabelOpExists, nil, false)
}

// cutSet reads "key OP (a,b)".
func cutSet(s, op string) (key string, values []string, ok bool) {
	fields := strings.Fields(s)
	if len(fields) < 3 || fields[1] != op {
		return "", nil, false
	}

	set := strings.TrimSpace(strings.Join(fields[2:], " "))

	inner, found := strings.CutPrefix(set, "(")
	if !found {
		return "", nil, false
	}

	inner, found = strings.CutSuffix(inner, ")")
	if !found {
		return "", nil, false
	}

	for v := range strings.SplitSeq(inner, ",") {
		values = append(values, strings.TrimSpace(v))
	}

	return fields[0], values, true
}

func term(key string, op resource.LabelOp, values []string, invert bool) (resource.LabelTerm, error) {
	key = strings.TrimSpace(key)

	if key == "" {
		return resource.LabelTerm{}, fmt.Errorf("a requirement has no key")
	}

	if strings.ContainsAny(key, " \t()!=,") {
		return resource.LabelTerm{}, fmt.Errorf("invalid key %q", key)
	}

	for _, v := range values {
		if op == resource.LabelOpIn && v == "" {
			return resource.LabelTerm{}, fmt.Errorf("the set of key %q has an empty value", key)
		}

		if strings.ContainsAny(v, " \t()!=,") {
			return resource.LabelTerm{}, fmt.Errorf("invalid value %q of key %q", v, key)
		}
	}

	return resource.LabelTerm{Key: key, Op: op, Value: values, Invert: invert}, nil
}

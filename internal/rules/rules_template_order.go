package rules

import (
	"fmt"
	"strings"
	"text/template/parse"
)

// The Talos CCM documents trimSuffix, trimPrefix, replace, contains, hasPrefix and hasSuffix with the string
// worked on first ({{ trimSuffix "hello" "lo" }}), while its code, like sprig, takes it last. talos-ccm
// takes sprig's order, which working configs ({{ .Hostname | trimSuffix ".lan" }}) depend on, and warns
// about calls that look written for the documented order: see ArgumentOrderWarnings.

// stringLastFuncs are the functions whose last argument is the string worked on, with what the arguments
// before it are.
var stringLastFuncs = map[string]struct {
	arity int
	affix string
}{
	"trimSuffix": {2, "the suffix"},
	"trimPrefix": {2, "the prefix"},
	"contains":   {2, "the substring"},
	"hasPrefix":  {2, "the prefix"},
	"hasSuffix":  {2, "the suffix"},
	"replace":    {3, "the old and the new string"},
}

// ArgumentOrderWarnings lists the calls of text that look written with the string first, the order of the
// Talos CCM's documentation, rather than last (sprig's order, which talos-ccm takes). The heuristic, for a
// call with all its arguments written out (a piped value is always the string, so pipelines never warn):
//   - the first argument is not a literal (a fact such as .Hostname, a variable, a call) and the last one
//     is a string literal: {{ trimSuffix .Hostname ".lan" }}, {{ replace .Hostname "." "-" }};
//   - every argument is a string literal, and the call means something in the documented order and not in
//     sprig's: {{ trimSuffix "hello" "lo" }} ("lo" ends "hello", "hello" does not end "lo"),
//     {{ replace "hello" "l" "L" }} ("l" is in "hello", "hello" is not in "L").
//
// A template that does not parse gives no warning (it is an error of its own).
func ArgumentOrderWarnings(text string) []string {
	if !isTemplated(text) {
		return nil
	}

	t, err := parseTemplate(text)
	if err != nil || t == nil || t.Root == nil {
		return nil
	}

	var out []string

	walkCommands(t.Root, func(cmd *parse.CommandNode) {
		if w := argumentOrderWarning(cmd); w != "" {
			out = append(out, w)
		}
	})

	return out
}

// walkCommands calls fn for every command under n, those of parenthesized pipelines included.
func walkCommands(n parse.Node, fn func(*parse.CommandNode)) {
	var pipe func(p *parse.PipeNode)

	pipe = func(p *parse.PipeNode) {
		if p == nil {
			return
		}

		for _, cmd := range p.Cmds {
			fn(cmd)

			for _, arg := range cmd.Args {
				if nested, ok := arg.(*parse.PipeNode); ok {
					pipe(nested)
				}
			}
		}
	}

	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}

		for _, c := range n.Nodes {
			walkCommands(c, fn)
		}
	case *parse.ActionNode:
		pipe(n.Pipe)
	case *parse.IfNode:
		pipe(n.Pipe)
		walkCommands(n.List, fn)
		walkCommands(n.ElseList, fn)
	case *parse.WithNode:
		pipe(n.Pipe)
		walkCommands(n.List, fn)
		walkCommands(n.ElseList, fn)
	}
}

func argumentOrderWarning(cmd *parse.CommandNode) string {
	if len(cmd.Args) == 0 {
		return ""
	}

	ident, ok := cmd.Args[0].(*parse.IdentifierNode)
	if !ok {
		return ""
	}

	fn, ok := stringLastFuncs[ident.Ident]
	if !ok || len(cmd.Args)-1 != fn.arity {
		return ""
	}

	args := cmd.Args[1:]
	literals := make([]string, 0, len(args))

	for _, a := range args {
		if s, isString := a.(*parse.StringNode); isString {
			literals = append(literals, s.Text)
		}
	}

	_, firstIsLiteral := args[0].(*parse.StringNode)
	_, lastIsLiteral := args[len(args)-1].(*parse.StringNode)

	suspicious := false

	switch {
	case !firstIsLiteral && lastIsLiteral && isValueNode(args[0]):
		suspicious = true
	case len(literals) == len(args):
		suspicious = meansStringFirst(ident.Ident, literals)
	}

	if !suspicious {
		return ""
	}

	// The same call in sprig's order: the documented first argument (the string) moves to the end.
	swapped := make([]string, 0, len(args))
	for _, a := range args[1:] {
		swapped = append(swapped, a.String())
	}

	swapped = append(swapped, args[0].String())

	return fmt.Sprintf("{{ %s }} looks written with the string first, the order the Talos CCM's documentation shows: %s takes %s first and the string last (sprig's order, and the Talos CCM's code), so write {{ %s %s }} or {{ %s | %s %s }}",
		cmd.String(), ident.Ident, fn.affix, ident.Ident, strings.Join(swapped, " "), args[0].String(), ident.Ident, strings.Join(swapped[:len(swapped)-1], " "))
}

// isValueNode reports whether n is a value the operator does not write out: a fact, a variable, a call.
func isValueNode(n parse.Node) bool {
	switch n.(type) {
	case *parse.FieldNode, *parse.VariableNode, *parse.PipeNode, *parse.ChainNode, *parse.DotNode:
		return true
	default:
		return false
	}
}

// meansStringFirst reports whether a call with literal arguments means something in the documented order
// (the string first) and nothing in sprig's.
func meansStringFirst(fn string, a []string) bool {
	switch fn {
	case "trimSuffix", "hasSuffix":
		return a[0] != a[1] && strings.HasSuffix(a[0], a[1]) && !strings.HasSuffix(a[1], a[0])
	case "trimPrefix", "hasPrefix":
		return a[0] != a[1] && strings.HasPrefix(a[0], a[1]) && !strings.HasPrefix(a[1], a[0])
	case "contains":
		return a[0] != a[1] && strings.Contains(a[0], a[1]) && !strings.Contains(a[1], a[0])
	case "replace":
		// Documented: replace S OLD NEW; sprig: replace OLD NEW S.
		return a[1] != "" && strings.Contains(a[0], a[1]) && !strings.Contains(a[2], a[0])
	default:
		return false
	}
}

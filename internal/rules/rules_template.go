package rules

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"
	"unicode/utf8"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// Templates of transformation rules are text/template (never html/template: a label is not HTML, and
// "a+b&c" must stay "a+b&c"), executed on templateFacts with the functions of templateFuncs.

// Limits of templates. A template comes from the operator, but the facts it works on come from the machine,
// and a template must neither loop nor grow a value without bound whatever the two of them hold. What can be
// refused when the config is loaded is refused there (see checkTemplateNode): loops (range), named templates
// and calls to them (define, template, block: the only way to recurse), printf widths and precisions over
// maxFormatWidth, templates longer than maxTemplateLength. What depends on the facts is bounded when the
// template runs: every value a function takes or gives, and the whole output, is at most maxRenderedLength
// long, and a function that would give more fails before it builds it. Without loops and recursion, a
// template then does at most work proportional to its length times maxRenderedLength. There is no
// wall-clock timeout on top: a rule's verdict must not depend on how loaded the machine running talos-ccm
// is (a node would lose and regain labels with the load), and the decision controllers read no clock.
const (
	// maxRenderedLength bounds the output of one template and every value its functions take or give: an
	// annotation value is the longest legitimate output, and the API server refuses more than 256 KiB of
	// annotations anyway.
	maxRenderedLength = 64 << 10
	// maxTemplateLength bounds the text of a template (a value without template actions is not a template
	// and is not bounded here).
	maxTemplateLength = 4 << 10
	// maxFormatWidth bounds the widths and precisions of printf directives: fmt takes up to a million, and
	// builds a megabyte for every "%0999999d" of a format before anything could check its length.
	maxFormatWidth = 1024
	// maxCachedPatternLength is the longest regular expression kept in the cache: patterns read from facts
	// must not fill the memory.
	maxCachedPatternLength = 1 << 10
)

// maxCacheEntries bounds the caches of parsed templates and compiled regular expressions; a cache that
// reaches it starts over.
const maxCacheEntries = 4096

// templateFacts is the type of what a template sees, a pointer to a struct of one field per fact of the
// facts table, in its order (the Talos PlatformMetadata and SystemInformation fields under their Talos Go
// names, as the Talos CCM documentation names them, and the machine's type). A struct, not a map: a
// template reads its fields alone, not its keys with index or its length with len.
var templateFacts = func() reflect.Type {
	fields := make([]reflect.StructField, 0, len(factTable))
	for _, f := range factTable {
		fields = append(fields, reflect.StructField{Name: f.Field, Type: f.Type()})
	}

	return reflect.PointerTo(reflect.StructOf(fields))
}()

// templateFieldNames are the fields of templateFacts, in order, for messages.
var templateFieldNames = func() []string {
	out := make([]string, 0, len(factTable))
	for _, f := range factTable {
		out = append(out, f.Field)
	}

	return out
}()

// newTemplateFacts returns what a template sees of pm, a templateFacts.
func newTemplateFacts(pm *specs.PlatformMetadataSpec) any {
	v := reflect.New(templateFacts.Elem())

	for i, f := range factTable {
		v.Elem().Field(i).Set(f.Get(pm))
	}

	return v.Interface()
}

// templateFuncs are the functions of the Talos CCM documentation, with the argument orders of sprig (and of
// the Talos CCM's code, whatever its documentation shows): the string worked on comes last, so that it can
// be piped in ({{ .Hostname | trimSuffix ".lan" }}, trimSuffix ".lan" "web-1.lan" gives "web-1"), the
// pattern first for the regex functions. regexFindString and getValue are not sprig's: they take the
// Talos CCM's orders (pattern, string, index; source, key).
// Every function that gives a string checks the lengths of what it takes and gives (maxRenderedLength).
// The built-in functions that build strings (print, printf, println, html, js, urlquery) are replaced by
// bounded equivalents; the other built-ins (and, or, not, len, index, slice, eq...) give no new strings.
var templateFuncs = template.FuncMap{
	"default":  tmplDefault,
	"empty":    isEmpty,
	"coalesce": tmplCoalesce,
	"ternary":  tmplTernary,

	"upper":      boundedString("upper", strings.ToUpper),
	"lower":      boundedString("lower", strings.ToLower),
	"trim":       boundedString("trim", strings.TrimSpace),
	"trimSuffix": boundedStrings("trimSuffix", func(suffix, s string) string { return strings.TrimSuffix(s, suffix) }),
	"trimPrefix": boundedStrings("trimPrefix", func(prefix, s string) string { return strings.TrimPrefix(s, prefix) }),
	"replace":    tmplReplace,

	"regexFind":       tmplRegexFind,
	"regexFindString": tmplRegexFindString,
	"regexReplaceAll": tmplRegexReplaceAll,

	"contains":  func(substr, s string) bool { return strings.Contains(s, substr) },
	"hasPrefix": func(prefix, s string) bool { return strings.HasPrefix(s, prefix) },
	"hasSuffix": func(suffix, s string) bool { return strings.HasSuffix(s, suffix) },

	"b64enc": tmplBase64Encode,
	"b64dec": tmplBase64Decode,

	"getValue": tmplGetValue,

	"print":    tmplPrint,
	"println":  tmplPrintln,
	"printf":   tmplPrintf,
	"html":     escaper("html", template.HTMLEscapeString),
	"js":       escaper("js", template.JSEscapeString),
	"urlquery": escaper("urlquery", url.QueryEscape),
}

// regexFuncs take a regular expression as their first argument: a literal one is checked at load time.
var regexFuncs = []string{"regexFind", "regexFindString", "regexReplaceAll"}

// tmplDefault returns given when it is set (not empty), d otherwise: {{ default "none" .Zone }} or
// {{ .Zone | default "none" }}.
func tmplDefault(d any, given ...any) any {
	if len(given) == 0 || isEmpty(given[0]) {
		return d
	}

	return given[0]
}

// isEmpty reports whether v is nil or the zero value of its type (an empty string, map or list, false, 0).
func isEmpty(v any) bool {
	rv := reflect.ValueOf(v)
	if !rv.IsValid() {
		return true
	}

	switch rv.Kind() { //nolint:exhaustive // Every other kind is compared with its zero value.
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return rv.Len() == 0
	case reflect.Pointer, reflect.Interface:
		return rv.IsNil()
	default:
		return rv.IsZero()
	}
}

// tmplCoalesce returns the first non-empty argument, or "" (never nil, which text/template would print as
// "<no value>").
func tmplCoalesce(values ...any) any {
	for _, v := range values {
		if !isEmpty(v) {
			return v
		}
	}

	return ""
}

// tmplTernary returns ifTrue when cond holds, ifFalse otherwise: {{ ternary "spot" "on-demand" .Spot }}.
func tmplTernary(ifTrue, ifFalse any, cond bool) any {
	if cond {
		return ifTrue
	}

	return ifFalse
}

// errTooLong is the error of a function whose argument or result would be longer than maxRenderedLength.
func errTooLong(fn, what string, n int) error {
	return fmt.Errorf("%s: %s would be %d bytes long, more than %d", fn, what, n, maxRenderedLength)
}

// checkArgs refuses arguments longer than maxRenderedLength: a fact that long is not a label, an annotation
// or a taint, and bounding what functions take bounds what they may build from it.
func checkArgs(fn string, args ...string) error {
	for _, a := range args {
		if len(a) > maxRenderedLength {
			return errTooLong(fn, "an argument", len(a))
		}
	}

	return nil
}

// checkResult refuses a result longer than maxRenderedLength.
func checkResult(fn, out string) (string, error) {
	if len(out) > maxRenderedLength {
		return "", errTooLong(fn, "the result", len(out))
	}

	return out, nil
}

// boundedString wraps a function of one string whose result is at most a few times longer than its
// argument (strings.ToUpper turns an invalid byte into three).
func boundedString(name string, fn func(string) string) func(string) (string, error) {
	return func(s string) (string, error) {
		if err := checkArgs(name, s); err != nil {
			return "", err
		}

		return checkResult(name, fn(s))
	}
}

// boundedStrings wraps a function of two strings whose result is not longer than one of its arguments.
func boundedStrings(name string, fn func(string, string) string) func(string, string) (string, error) {
	return func(s, t string) (string, error) {
		if err := checkArgs(name, s, t); err != nil {
			return "", err
		}

		return fn(s, t), nil
	}
}

// tmplReplace replaces every old in s with repl (sprig's order: replace " " "-" .Value), after checking the
// length of the result: replacing "" inserts repl between every two bytes.
func tmplReplace(old, repl, s string) (string, error) {
	if err := checkArgs("replace", s, old, repl); err != nil {
		return "", err
	}

	n := strings.Count(s, old)
	if size := len(s) + n*(len(repl)-len(old)); size > maxRenderedLength {
		return "", errTooLong("replace", "the result", size)
	}

	return strings.ReplaceAll(s, old, repl), nil
}

// tmplRegexFind returns the leftmost match of pattern in s.
func tmplRegexFind(pattern, s string) (string, error) {
	if err := checkArgs("regexFind", pattern, s); err != nil {
		return "", err
	}

	re, err := compileRegexp(pattern)
	if err != nil {
		return "", err
	}

	return re.FindString(s), nil
}

// tmplRegexFindString returns submatch n of the leftmost match of pattern in s, or "" when there is none.
func tmplRegexFindString(pattern, s string, n int) (string, error) {
	if err := checkArgs("regexFindString", pattern, s); err != nil {
		return "", err
	}

	re, err := compileRegexp(pattern)
	if err != nil {
		return "", err
	}

	m := re.FindStringSubmatch(s)
	if n < 0 || n >= len(m) {
		return "", nil
	}

	return m[n], nil
}

// tmplRegexReplaceAll replaces every match of pattern in s with repl, which may refer to submatches as $1
// or ${1}. The length of the result is bounded before it is built: a match of m bytes becomes at most repl
// plus m-2 bytes for every "$" of repl (a reference takes at least two bytes of repl and gives a submatch,
// which lies within the match). The bound may refuse a result somewhat under the limit when repl refers to
// submatches of long matches.
func tmplRegexReplaceAll(pattern, s, repl string) (string, error) {
	if err := checkArgs("regexReplaceAll", pattern, s, repl); err != nil {
		return "", err
	}

	re, err := compileRegexp(pattern)
	if err != nil {
		return "", err
	}

	refs := strings.Count(repl, "$")
	size := len(s)

	for _, m := range re.FindAllStringIndex(s, -1) {
		size += len(repl) - (m[1] - m[0]) + refs*max(0, m[1]-m[0]-2)
		if size > maxRenderedLength {
			return "", errTooLong("regexReplaceAll", "the result", size)
		}
	}

	return re.ReplaceAllString(s, repl), nil
}

func tmplBase64Encode(s string) (string, error) {
	if err := checkArgs("b64enc", s); err != nil {
		return "", err
	}

	if size := base64.StdEncoding.EncodedLen(len(s)); size > maxRenderedLength {
		return "", errTooLong("b64enc", "the result", size)
	}

	return base64.StdEncoding.EncodeToString([]byte(s)), nil
}

func tmplBase64Decode(s string) (string, error) {
	if err := checkArgs("b64dec", s); err != nil {
		return "", err
	}

	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("failed to decode base64: %w", err)
	}

	return string(b), nil
}

// tmplGetValue returns the value of key in a "k1=v1;k2=v2" list (an SMBIOS serial number written by a
// hypervisor, for instance), or "" when the key is missing. Spaces around keys and values are ignored; a
// value may contain "=".
func tmplGetValue(source, key string) (string, error) {
	if err := checkArgs("getValue", source, key); err != nil {
		return "", err
	}

	for part := range strings.SplitSeq(source, ";") {
		k, v, ok := strings.Cut(part, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), nil
		}
	}

	return "", nil
}

// boundedBuilder collects the output of a formatting function, failing once it is longer than
// maxRenderedLength.
type boundedBuilder struct {
	fn string
	b  strings.Builder
}

func (b *boundedBuilder) add(s string) error {
	if size := b.b.Len() + len(s); size > maxRenderedLength {
		return errTooLong(b.fn, "the result", size)
	}

	b.b.WriteString(s)

	return nil
}

// formatArg formats one operand as fmt.Sprint does, refusing a string operand longer than
// maxRenderedLength before it is copied.
func formatArg(fn string, arg any) (string, error) {
	if s, ok := arg.(string); ok {
		return s, checkArgs(fn, s)
	}

	return fmt.Sprint(arg), nil
}

// isStringArg is fmt's test for the operands between which Sprint puts no space.
func isStringArg(arg any) bool {
	return arg != nil && reflect.TypeOf(arg).Kind() == reflect.String
}

// tmplPrint is fmt.Sprint (text/template's print), built operand by operand within maxRenderedLength.
func tmplPrint(args ...any) (string, error) {
	out := boundedBuilder{fn: "print"}

	for i, arg := range args {
		if i > 0 && !isStringArg(arg) && !isStringArg(args[i-1]) {
			if err := out.add(" "); err != nil {
				return "", err
			}
		}

		s, err := formatArg("print", arg)
		if err == nil {
			err = out.add(s)
		}

		if err != nil {
			return "", err
		}
	}

	return out.b.String(), nil
}

// tmplPrintln is fmt.Sprintln (text/template's println), built operand by operand within
// maxRenderedLength.
func tmplPrintln(args ...any) (string, error) {
	out := boundedBuilder{fn: "println"}

	for i, arg := range args {
		if i > 0 {
			if err := out.add(" "); err != nil {
				return "", err
			}
		}

		s, err := formatArg("println", arg)
		if err == nil {
			err = out.add(s)
		}

		if err != nil {
			return "", err
		}
	}

	if err := out.add("\n"); err != nil {
		return "", err
	}

	return out.b.String(), nil
}

// tmplPrintf is fmt.Sprintf (text/template's printf), formatted directive by directive within
// maxRenderedLength. Widths and precisions are at most maxFormatWidth; widths and precisions taken from
// operands (*) and explicit operand indexes ([n]) are refused.
func tmplPrintf(format string, args ...any) (string, error) {
	if err := checkArgs("printf", format); err != nil {
		return "", err
	}

	out := boundedBuilder{fn: "printf"}
	next := 0

	for rest := format; rest != ""; {
		text, directive, verb, after, err := nextDirective(rest)
		if err != nil {
			return "", fmt.Errorf("printf: %w", err)
		}

		rest = after

		if err = out.add(text); err != nil {
			return "", err
		}

		var piece string

		switch {
		case directive == "":
			continue
		case verb == '%':
			// %% takes no operand and ignores its width.
			piece = "%"
		case verb == 0:
			// fmt's messages for a missing verb and a missing operand.
			piece = "%!(NOVERB)"
		case next >= len(args):
			piece = "%!" + string(verb) + "(MISSING)"
		default:
			if s, ok := args[next].(string); ok {
				if err = checkArgs("printf", s); err != nil {
					return "", err
				}
			}

			piece = fmt.Sprintf(directive, args[next])
			if reflect.TypeOf(args[next]) == templateFacts {
				// %T and %#v name the facts' type as text/template's messages do.
				piece = templateTypeNames.Replace(piece)
			}
			next++
		}

		if err = out.add(piece); err != nil {
			return "", err
		}
	}

	if next < len(args) {
		// fmt's message about the operands the format did not use: %!(EXTRA type=value, ...).
		if err := out.add("%!(EXTRA "); err != nil {
			return "", err
		}

		for i, arg := range args[next:] {
			piece := "<nil>"

			if arg != nil {
				s, err := formatArg("printf", arg)
				if err != nil {
					return "", err
				}

				piece = reflect.TypeOf(arg).String() + "=" + s
			}

			if i > 0 {
				piece = ", " + piece
			}

			if err := out.add(piece); err != nil {
				return "", err
			}
		}

		if err := out.add(")"); err != nil {
			return "", err
		}
	}

	return out.b.String(), nil
}

// nextDirective splits the text before the first printf directive of format, the directive itself (""
// when there is none), its verb (0 when the format ends before it) and the rest of format. It follows
// fmt's grammar: "%", flags among "#0+- ", a width, "." and a precision, the verb. Widths and precisions
// over maxFormatWidth, and those taken from operands (*) or explicit operand indexes ([n]), are errors.
func nextDirective(format string) (text, directive string, verb rune, rest string, err error) {
	i := strings.IndexByte(format, '%')
	if i < 0 {
		return format, "", 0, "", nil
	}

	text, start := format[:i], i
	i++

	for i < len(format) && strings.IndexByte("#0+- ", format[i]) >= 0 {
		i++
	}

	number := func(what string) error {
		switch {
		case i < len(format) && format[i] == '*':
			return fmt.Errorf("%s from an operand (*) is not allowed", what)
		case i < len(format) && format[i] == '[':
			return errors.New("operand indexes ([n]) are not allowed")
		}

		digits := i
		for i < len(format) && format[i] >= '0' && format[i] <= '9' {
			i++
		}

		if n, convErr := strconv.Atoi(format[digits:i]); i > digits && (convErr != nil || n > maxFormatWidth) {
			return fmt.Errorf("%s %s is more than %d", what, format[digits:i], maxFormatWidth)
		}

		return nil
	}

	if err = number("width"); err != nil {
		return "", "", 0, "", err
	}

	if i < len(format) && format[i] == '.' {
		i++

		if err = number("precision"); err != nil {
			return "", "", 0, "", err
		}
	}

	if i < len(format) && format[i] == '[' {
		return "", "", 0, "", errors.New("operand indexes ([n]) are not allowed")
	}

	if i >= len(format) {
		return text, format[start:], 0, "", nil
	}

	verb, size := utf8.DecodeRuneInString(format[i:])
	i += size

	return text, format[start:i], verb, format[i:], nil
}

// escaper is a bounded html, js or urlquery: the escaped print of its operands.
func escaper(name string, escape func(string) string) func(...any) (string, error) {
	return func(args ...any) (string, error) {
		s, err := tmplPrint(args...)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}

		return checkResult(name, escape(s))
	}
}

// isTemplated reports whether text has template actions; text without any renders as itself.
func isTemplated(text string) bool {
	return strings.Contains(text, "{{")
}

// ValidateTemplate checks a rule template without executing it: its syntax, its functions, the fields it
// reads and its literal regular expressions.
func ValidateTemplate(text string) error {
	_, err := parseTemplate(text)

	return err
}

type templateEntry struct {
	tmpl *template.Template
	err  error
}

var (
	templateCacheMu sync.Mutex
	templateCache   = map[string]templateEntry{}
)

// parseTemplate parses and checks text, or returns the result of an earlier call: templates are parsed
// once per distinct text, not once per node. A parsed template is safe for concurrent execution.
func parseTemplate(text string) (*template.Template, error) {
	templateCacheMu.Lock()
	e, ok := templateCache[text]
	templateCacheMu.Unlock()

	if ok {
		return e.tmpl, e.err
	}

	e.tmpl, e.err = parseTemplateUncached(text)
	if e.err != nil {
		e.tmpl = nil
	}

	templateCacheMu.Lock()
	if len(templateCache) >= maxCacheEntries {
		clear(templateCache)
	}

	templateCache[text] = e
	templateCacheMu.Unlock()

	return e.tmpl, e.err
}

func parseTemplateUncached(text string) (*template.Template, error) {
	if isTemplated(text) && len(text) > maxTemplateLength {
		return nil, fmt.Errorf("invalid template: %d bytes long, more than %d", len(text), maxTemplateLength)
	}

	t, err := template.New("").Option("missingkey=zero").Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("invalid template: %s", templateErrorMessage(err))
	}

	// {{ define }} and {{ block }} add named templates, the only thing {{ template }} can call: refusing
	// them (and {{ template }} in checkTemplateNode) rules out recursion.
	for _, named := range t.Templates() {
		if named.Name() != "" {
			return nil, fmt.Errorf("invalid template: {{ define %q }} and {{ block %q }} are not allowed: a rule template is a single template", named.Name(), named.Name())
		}
	}

	if t.Tree == nil || t.Root == nil {
		// Nothing at all: renders as the empty string.
		return t, nil
	}

	if err = checkTemplateNode(t.Root, true); err != nil {
		return nil, fmt.Errorf("invalid template: %w", err)
	}

	return t, nil
}

// checkTemplateNode checks what is under n: no loop, no call to a named template, only known fields of the
// facts, valid literal regular expressions and printf formats. dotIsFacts is false inside with, where the
// dot is something else than the facts.
func checkTemplateNode(n parse.Node, dotIsFacts bool) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}

		for _, c := range n.Nodes {
			if err := checkTemplateNode(c, dotIsFacts); err != nil {
				return err
			}
		}
	case *parse.ActionNode:
		return checkTemplatePipe(n.Pipe, dotIsFacts)
	case *parse.IfNode:
		return errors.Join(checkTemplatePipe(n.Pipe, dotIsFacts), checkTemplateNode(n.List, dotIsFacts), checkTemplateNode(n.ElseList, dotIsFacts))
	case *parse.WithNode:
		return errors.Join(checkTemplatePipe(n.Pipe, dotIsFacts), checkTemplateNode(n.List, false), checkTemplateNode(n.ElseList, dotIsFacts))
	case *parse.RangeNode:
		// No loop at all: ranging over a number or a variable could run for as long as it likes, nested
		// ranges over the tags would multiply the work by the machine's tag count at every level, and a
		// label or annotation value has no use for a loop: .Tags.KEY and index .Tags "KEY" read any tag.
		return fmt.Errorf("{{ range }} is not allowed (line %d): read a tag with .Tags.KEY or index .Tags \"KEY\"", n.Line)
	case *parse.TemplateNode:
		return fmt.Errorf("{{ template %q }} is not allowed (line %d): a rule template is a single template", n.Name, n.Line)
	}

	return nil
}

func checkTemplatePipe(p *parse.PipeNode, dotIsFacts bool) error {
	if p == nil {
		return nil
	}

	for _, cmd := range p.Cmds {
		if err := errors.Join(checkRegexLiteral(cmd), checkPrintfLiteral(cmd)); err != nil {
			return err
		}

		for _, arg := range cmd.Args {
			if err := checkTemplateArg(arg, dotIsFacts); err != nil {
				return err
			}
		}
	}

	return nil
}

func checkTemplateArg(arg parse.Node, dotIsFacts bool) error {
	switch a := arg.(type) {
	case *parse.FieldNode:
		if dotIsFacts {
			return checkFieldPath(a.Ident)
		}
	case *parse.VariableNode:
		// $ is always the facts; other variables hold whatever they were given.
		if len(a.Ident) > 1 && a.Ident[0] == "$" {
			return checkFieldPath(a.Ident[1:])
		}
	case *parse.ChainNode:
		return checkTemplateArg(a.Node, dotIsFacts)
	case *parse.PipeNode:
		return checkTemplatePipe(a, dotIsFacts)
	}

	return nil
}

// checkPrintfLiteral checks the literal format of a printf call as it would be checked when rendered.
func checkPrintfLiteral(cmd *parse.CommandNode) error {
	if len(cmd.Args) < 2 {
		return nil
	}

	fn, ok := cmd.Args[0].(*parse.IdentifierNode)
	if !ok || fn.Ident != "printf" {
		return nil
	}

	format, ok := cmd.Args[1].(*parse.StringNode)
	if !ok {
		return nil
	}

	for rest := format.Text; rest != ""; {
		_, _, _, after, err := nextDirective(rest)
		if err != nil {
			return fmt.Errorf("printf %q: %w", format.Text, err)
		}

		rest = after
	}

	return nil
}

// TemplateFacts lists the facts a template reads (.Hostname, .Tags.Role, "." for all of them), each once,
// in order; nil for a value without template actions or one that reads no fact.
func TemplateFacts(text string) []string {
	if !isTemplated(text) {
		return nil
	}

	t, err := parseTemplate(text)
	if err != nil || t.Tree == nil {
		return nil
	}

	var out []string

	add := func(path []string) {
		name := "." + strings.Join(path, ".")
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}

	var (
		walkNode func(n parse.Node, dotIsFacts bool)
		walkArg  func(arg parse.Node, dotIsFacts bool)
	)

	walkArg = func(arg parse.Node, dotIsFacts bool) {
		switch a := arg.(type) {
		case *parse.FieldNode:
			if dotIsFacts {
				add(a.Ident[:min(len(a.Ident), 2)])
			}
		case *parse.DotNode:
			if dotIsFacts {
				add(nil)
			}
		case *parse.VariableNode:
			if a.Ident[0] == "$" {
				add(a.Ident[1:min(len(a.Ident), 3)])
			}
		case *parse.ChainNode:
			walkArg(a.Node, dotIsFacts)
		case *parse.PipeNode:
			walkNode(a, dotIsFacts)
		}
	}

	walkNode = func(n parse.Node, dotIsFacts bool) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walkNode(c, dotIsFacts)
				}
			}
		case *parse.PipeNode:
			if n != nil {
				for _, cmd := range n.Cmds {
					for _, arg := range cmd.Args {
						walkArg(arg, dotIsFacts)
					}
				}
			}
		case *parse.ActionNode:
			walkNode(n.Pipe, dotIsFacts)
		case *parse.IfNode:
			walkNode(n.Pipe, dotIsFacts)
			walkNode(n.List, dotIsFacts)
			walkNode(n.ElseList, dotIsFacts)
		case *parse.WithNode:
			walkNode(n.Pipe, dotIsFacts)
			walkNode(n.List, false)
			walkNode(n.ElseList, dotIsFacts)
		}
	}

	walkNode(t.Root, true)

	return out
}

// checkFieldPath checks a field access on the facts: a known field, and nothing below it but a tag of Tags.
func checkFieldPath(path []string) error {
	if len(path) == 0 {
		return nil
	}

	name := path[0]

	if !slices.Contains(templateFieldNames, name) {
		for _, known := range templateFieldNames {
			if strings.EqualFold(known, name) {
				return fmt.Errorf("unknown field .%s (did you mean .%s? template fields are case-sensitive)", name, known)
			}
		}

		return fmt.Errorf("unknown field .%s (known: .%s)", name, strings.Join(templateFieldNames, ", ."))
	}

	if len(path) > 1 && name != "Tags" {
		return fmt.Errorf("field .%s has no field .%s", name, path[1])
	}

	if len(path) > 2 {
		return fmt.Errorf("tag .Tags.%s has no field .%s", path[1], path[2])
	}

	return nil
}

// checkRegexLiteral compiles the literal pattern of a regex function call.
func checkRegexLiteral(cmd *parse.CommandNode) error {
	if len(cmd.Args) < 2 {
		return nil
	}

	fn, ok := cmd.Args[0].(*parse.IdentifierNode)
	if !ok || !slices.Contains(regexFuncs, fn.Ident) {
		return nil
	}

	pattern, ok := cmd.Args[1].(*parse.StringNode)
	if !ok {
		return nil
	}

	if _, err := compileRegexp(pattern.Text); err != nil {
		return fmt.Errorf("%s: %w", fn.Ident, err)
	}

	return nil
}

// limitedBuffer fails the template execution once it has been given more than maxRenderedLength bytes.
type limitedBuffer struct {
	bytes.Buffer
}

var errRenderedTooLong = fmt.Errorf("the output is longer than %d bytes", maxRenderedLength)

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.Len()+len(p) > maxRenderedLength {
		return 0, errRenderedTooLong
	}

	return b.Buffer.Write(p)
}

// renderTemplate executes text on the facts, a templateFacts.
func renderTemplate(text string, facts any) (string, error) {
	if !isTemplated(text) {
		return text, nil
	}

	t, err := parseTemplate(text)
	if err != nil {
		return "", err
	}

	var out limitedBuffer

	if err = t.Execute(&out, facts); err != nil {
		return "", fmt.Errorf("failed to render template %q: %s", text, templateErrorMessage(err))
	}

	return out.String(), nil
}

// templateErrorPrefix is what text/template puts before its messages: the (empty) template name, the line
// and the column.
var templateErrorPrefix = regexp.MustCompile(`^template: :\d+(:\d+)?: (executing "" )?`)

// templateTypeNames shortens the type of the facts in text/template's messages ("can't evaluate field Foo
// in type ..."): the struct type built from the facts table would spell out every field, where a named
// type reads as its name.
var templateTypeNames = strings.NewReplacer(
	templateFacts.String(), "*rules.templateFacts",
	templateFacts.Elem().String(), "rules.templateFacts",
)

// templateErrorMessage is a text/template error without the prefix that only repeats the template, and
// with the type of the facts named.
func templateErrorMessage(err error) string {
	return templateTypeNames.Replace(templateErrorPrefix.ReplaceAllString(err.Error(), ""))
}

var (
	regexpCacheMu sync.Mutex
	regexpCache   = map[string]*regexp.Regexp{}
)

// compileRegexp compiles a Go regular expression, or returns the result of an earlier call.
func compileRegexp(pattern string) (*regexp.Regexp, error) {
	regexpCacheMu.Lock()
	re, ok := regexpCache[pattern]
	regexpCacheMu.Unlock()

	if ok {
		return re, nil
	}

	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, fmt.Errorf("invalid regular expression %q: %w", pattern, err)
	}

	if len(pattern) > maxCachedPatternLength {
		return re, nil
	}

	regexpCacheMu.Lock()
	if len(regexpCache) >= maxCacheEntries {
		clear(regexpCache)
	}

	regexpCache[pattern] = re
	regexpCacheMu.Unlock()

	return re, nil
}

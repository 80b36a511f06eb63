package node

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/template"
	"text/template/parse"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// Templates of transformation rules are text/template (never html/template: a label is not HTML, and
// "a+b&c" must stay "a+b&c"), executed on templateFacts with the functions of templateFuncs.

// maxRenderedLength bounds the output of one template: an annotation value is the longest legitimate
// output, and the API server refuses more than 256 KiB of annotations anyway.
const maxRenderedLength = 64 << 10

// maxCacheEntries bounds the caches of parsed templates and compiled regular expressions; a cache that
// reaches it starts over.
const maxCacheEntries = 4096

// templateFacts is what a template sees: the Talos PlatformMetadata and SystemInformation fields under
// their Talos Go names, as the Talos CCM documentation names them.
type templateFacts struct {
	Platform     string
	Hostname     string
	Region       string
	Zone         string
	InstanceType string
	InstanceID   string
	ProviderID   string
	Spot         bool
	InternalDNS  string
	ExternalDNS  string
	Tags         map[string]string
	Manufacturer string
	ProductName  string
	Version      string
	SerialNumber string
	UUID         string
	WakeUpType   string
	SKUNumber    string
}

// templateFieldNames are the fields of templateFacts, in declaration order, for messages.
var templateFieldNames = func() []string {
	t := reflect.TypeFor[templateFacts]()
	out := make([]string, 0, t.NumField())

	for i := range t.NumField() {
		out = append(out, t.Field(i).Name)
	}

	return out
}()

func newTemplateFacts(pm *specs.PlatformMetadataSpec) *templateFacts {
	return &templateFacts{
		Platform:     pm.GetPlatform(),
		Hostname:     pm.GetHostname(),
		Region:       pm.GetRegion(),
		Zone:         pm.GetZone(),
		InstanceType: pm.GetInstanceType(),
		InstanceID:   pm.GetInstanceId(),
		ProviderID:   pm.GetProviderId(),
		Spot:         pm.GetSpot(),
		InternalDNS:  pm.GetInternalDns(),
		ExternalDNS:  pm.GetExternalDns(),
		Tags:         pm.GetTags(),
		Manufacturer: pm.GetManufacturer(),
		ProductName:  pm.GetProductName(),
		Version:      pm.GetVersion(),
		SerialNumber: pm.GetSerialNumber(),
		UUID:         pm.GetUuid(),
		WakeUpType:   pm.GetWakeUpType(),
		SKUNumber:    pm.GetSkuNumber(),
	}
}

// templateFuncs are the functions of the Talos CCM documentation, with its argument orders: the string
// worked on comes first (trimSuffix "hello" "lo" gives "hel"), the pattern first for the regex functions.
var templateFuncs = template.FuncMap{
	"default":  tmplDefault,
	"empty":    isEmpty,
	"coalesce": tmplCoalesce,
	"ternary":  tmplTernary,

	"upper":      strings.ToUpper,
	"lower":      strings.ToLower,
	"trim":       strings.TrimSpace,
	"trimSuffix": strings.TrimSuffix,
	"trimPrefix": strings.TrimPrefix,
	"replace":    strings.ReplaceAll,

	"regexFind":       tmplRegexFind,
	"regexFindString": tmplRegexFindString,
	"regexReplaceAll": tmplRegexReplaceAll,

	"contains":  strings.Contains,
	"hasPrefix": strings.HasPrefix,
	"hasSuffix": strings.HasSuffix,

	"b64enc": tmplBase64Encode,
	"b64dec": tmplBase64Decode,

	"getValue": tmplGetValue,
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

// tmplRegexFind returns the leftmost match of pattern in s.
func tmplRegexFind(pattern, s string) (string, error) {
	re, err := compileRegexp(pattern)
	if err != nil {
		return "", err
	}

	return re.FindString(s), nil
}

// tmplRegexFindString returns submatch n of the leftmost match of pattern in s, or "" when there is none.
func tmplRegexFindString(pattern, s string, n int) (string, error) {
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
// or ${1}.
func tmplRegexReplaceAll(pattern, s, repl string) (string, error) {
	re, err := compileRegexp(pattern)
	if err != nil {
		return "", err
	}

	return re.ReplaceAllString(s, repl), nil
}

func tmplBase64Encode(s string) string {
	return base64.StdEncoding.EncodeToString([]byte(s))
}

func tmplBase64Decode(s string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return "", fmt.Errorf("failed to decode base64: %w", err)
	}

	return string(b), nil
}

// tmplGetValue returns the value of key in a "k1=v1;k2=v2" list (an SMBIOS serial number written by a
// hypervisor, for instance), or "" when the key is missing. Spaces around keys and values are ignored; a
// value may contain "=".
func tmplGetValue(source, key string) string {
	for part := range strings.SplitSeq(source, ";") {
		k, v, ok := strings.Cut(part, "=")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}

	return ""
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
	t, err := template.New("").Option("missingkey=zero").Funcs(templateFuncs).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("invalid template: %s", templateErrorMessage(err))
	}

	if t.Tree == nil || t.Root == nil {
		// Only definitions, or nothing at all: renders as the empty string.
		return t, nil
	}

	if err = checkTemplateNode(t.Root, true); err != nil {
		return nil, fmt.Errorf("invalid template: %w", err)
	}

	return t, nil
}

// checkTemplateNode checks the fields and literal regular expressions under n. dotIsFacts is false inside
// with and range, where the dot is something else than the facts.
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
		// Ranging over a number would let one template loop for as long as it likes.
		if len(n.Pipe.Cmds) == 1 && len(n.Pipe.Cmds[0].Args) == 1 {
			if _, ok := n.Pipe.Cmds[0].Args[0].(*parse.NumberNode); ok {
				return errors.New("range over a number is not allowed")
			}
		}

		return errors.Join(checkTemplatePipe(n.Pipe, dotIsFacts), checkTemplateNode(n.List, false), checkTemplateNode(n.ElseList, dotIsFacts))
	case *parse.TemplateNode:
		return checkTemplatePipe(n.Pipe, dotIsFacts)
	}

	return nil
}

func checkTemplatePipe(p *parse.PipeNode, dotIsFacts bool) error {
	if p == nil {
		return nil
	}

	for _, cmd := range p.Cmds {
		if err := checkRegexLiteral(cmd); err != nil {
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

// renderTemplate executes text on the facts.
func renderTemplate(text string, facts *templateFacts) (string, error) {
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

// templateErrorMessage is a text/template error without the prefix that only repeats the template.
func templateErrorMessage(err error) string {
	return templateErrorPrefix.ReplaceAllString(err.Error(), "")
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

	regexpCacheMu.Lock()
	if len(regexpCache) >= maxCacheEntries {
		clear(regexpCache)
	}

	regexpCache[pattern] = re
	regexpCacheMu.Unlock()

	return re, nil
}

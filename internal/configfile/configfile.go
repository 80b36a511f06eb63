// Package configfile reads the talos-ccm config file: global settings, transformation rules and the
// narrowing of kubelet serving certificate approval, in the format Talos CCM users already have.
//
// Decoding is strict: an unknown key (PreferIpv6 is not preferIPv6; only the Talos CCM's documented spelling
// PreferIPv6 is read, with a warning), a bad regular expression, an unknown
// operator or fact, a wrong number of values, an unparsable template, an invalid taint or an invalid CIDR
// is an error naming the file, the line and the rule. Every problem of a file is reported at once.
package configfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v4"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

// MaxSize is the largest config file accepted.
const MaxSize = 1 << 20

// maxProblemsShown bounds the problems Error prints; the others are counted.
const maxProblemsShown = 20

// Problem is one reason a config file is rejected.
type Problem struct {
	// Line is the line of the offending YAML node, 1-based; 0 when unknown.
	Line int
	// Rule names the transformation rule, `rule "NAME"` or `rule transformations[INDEX]`; empty outside rules.
	Rule string
	// Message says what is wrong.
	Message string
}

// Error lists every problem found in a config file.
type Error struct {
	// File is the name given to Parse (the path for Load).
	File     string
	Problems []Problem
}

// Error implements error: one "FILE:LINE: [rule ...: ]message" line per problem.
func (e *Error) Error() string {
	var b strings.Builder

	for i, p := range e.Problems {
		if i == maxProblemsShown {
			fmt.Fprintf(&b, "\n... and %d more problems", len(e.Problems)-i)

			break
		}

		if i > 0 {
			b.WriteByte('\n')
		}

		b.WriteString(e.File)

		if p.Line > 0 {
			fmt.Fprintf(&b, ":%d", p.Line)
		}

		b.WriteString(": ")

		if p.Rule != "" {
			b.WriteString(p.Rule + ": ")
		}

		b.WriteString(p.Message)
	}

	return b.String()
}

// Load reads and parses the config file at path.
func Load(path string) (*specs.ConfigSpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("failed to open config file: %w", err)
	}

	defer f.Close() //nolint:errcheck

	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("failed to read config file %s: %w", path, err)
	}

	return Parse(path, data)
}

// Parse parses a config file; name is used in messages and as the Config's source. An empty file is a
// valid config without rules. The result has FileSha256 set to the hash of data.
func Parse(name string, data []byte) (spec *specs.ConfigSpec, err error) {
	// The YAML library is third-party code run on operator input: whatever it does, the caller gets an
	// error, never a crash.
	defer func() {
		if r := recover(); r != nil {
			spec, err = nil, &Error{File: name, Problems: []Problem{{Message: fmt.Sprintf("failed to parse YAML: %v", r)}}}
		}
	}()

	if len(data) > MaxSize {
		return nil, &Error{File: name, Problems: []Problem{{Message: fmt.Sprintf("the file is larger than %d bytes", MaxSize)}}}
	}

	sum := sha256.Sum256(data)

	spec = &specs.ConfigSpec{Source: "file " + name, FileSha256: hex.EncodeToString(sum[:])}

	dec := yaml.NewDecoder(bytes.NewReader(data))

	var doc yaml.Node

	if err = dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return spec, nil
		}

		return nil, &Error{File: name, Problems: []Problem{yamlProblem(err)}}
	}

	var extra yaml.Node

	switch err = dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return nil, &Error{File: name, Problems: []Problem{yamlProblem(err)}}
	default:
		line := extra.Line
		if len(extra.Content) > 0 {
			line = extra.Content[0].Line
		}

		return nil, &Error{File: name, Problems: []Problem{{Line: line, Message: "the file holds more than one YAML document"}}}
	}

	p := &parser{budget: maxNodes}
	p.config(&doc, spec)

	if len(p.problems) > 0 {
		return nil, &Error{File: name, Problems: p.problems}
	}

	spec.Warnings = p.warnings

	return spec, nil
}

// yamlProblem turns a YAML syntax error into a Problem with its line. The library's error types are
// internal, so their mark is read by reflection; its parser (unlike its scanner) counts lines from 0.
func yamlProblem(err error) Problem {
	v := reflect.ValueOf(err)
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		v = v.Elem()
	}

	if v.Kind() != reflect.Struct {
		return Problem{Message: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}

	field := func(v reflect.Value, name string) reflect.Value {
		if !v.IsValid() || v.Kind() != reflect.Struct {
			return reflect.Value{}
		}

		return v.FieldByName(name)
	}

	msg, ctx, line := field(v, "Message"), field(v, "ContextMessage"), field(field(v, "Mark"), "Line")

	if !msg.IsValid() || msg.Kind() != reflect.String || !line.IsValid() || !line.CanInt() {
		return Problem{Message: "invalid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")}
	}

	out := Problem{Line: int(line.Int()), Message: "invalid YAML: " + msg.String()}

	if v.Type().Name() == "ParserError" {
		out.Line++
	}

	if ctx.IsValid() && ctx.Kind() == reflect.String && ctx.String() != "" {
		out.Message += " (" + ctx.String() + ")"
	}

	return out
}

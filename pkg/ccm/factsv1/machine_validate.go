package factsv1

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/talos-ccm/talos-ccm/internal/resources/talos"
)

// Bounds on one machine's facts: those talos-ccm applies to the facts it reads from a Talos API, so that a
// host cannot make talos-ccm hold more than a machine could. What a Talos machine reports beyond them is
// left out with a warning; a host is told instead, by Validate, since it can fix its facts.
const (
	maxFieldLength = talos.MaxFieldLength
	maxTags        = talos.MaxTags
	maxAddresses   = talos.MaxAddresses
)

// problems is everything wrong with one Machine, on one line.
type problems []error

func (p problems) Error() string {
	parts := make([]string, 0, len(p))
	for _, err := range p {
		parts = append(parts, err.Error())
	}

	return strings.Join(parts, "; ")
}

func (p problems) Unwrap() []error { return p }

// orNil returns p as an error, or nil when there is no problem: a nil problems in an error is not nil.
func (p problems) orNil() error {
	if len(p) == 0 {
		return nil
	}

	return p
}

// Validate says what in m talos-ccm cannot take, or returns nil: a Node name that is not a Kubernetes Node
// name, an unknown machine type or stage, an address or node IP that does not parse, an unknown exposure, an address listed
// with two exposures, and values beyond talos-ccm's bounds (1024 bytes a field, 256 tags, 512 addresses). Every
// problem is in the error, which errors.As and errors.Is see through.
func (m Machine) Validate() error {
	var errs problems

	if m.NodeName == "" {
		errs = append(errs, errors.New("nodeName: required"))
	} else if why := validation.IsDNS1123Subdomain(m.NodeName); len(why) > 0 {
		errs = append(errs, fmt.Errorf("nodeName %s: not a Kubernetes Node name: %s", quote(m.NodeName), strings.Join(why, ", ")))
	}

	for _, mf := range machineFacts {
		errs = append(errs, mf.check(reflect.ValueOf(m).Field(mf.index))...)
	}

	if !m.Stage.known() {
		errs = append(errs, notAmong("stage", m.Stage, stages))
	}

	addresses, addressErrs := m.addresses(options{})
	errs = append(errs, addressErrs...)

	if len(addresses) > maxAddresses {
		errs = append(errs, fmt.Errorf("addresses: %d with the node IPs, more than %d", len(addresses), maxAddresses))
	}

	return errs.orNil()
}

// check says what talos-ccm cannot take of the fact's value v: a value not among the fact's Values, a text
// checkText refuses, tags too many or checkText refuses.
func (mf machineFact) check(v reflect.Value) problems {
	switch v.Kind() {
	case reflect.String:
		switch s := v.String(); {
		case len(mf.fact.Values) == 0:
			if err := checkText(mf.name, s); err != nil {
				return problems{err}
			}
		case s != "" && !slices.Contains(mf.fact.Values, s):
			return problems{notAmong(mf.name, s, mf.fact.Values)}
		}
	case reflect.Map:
		return checkTags(mf.name, v.Interface().(map[string]string))
	}

	return nil
}

// notAmong says that the value of name is none of values, which an empty value is not either.
func notAmong[T ~string](name string, value T, values []T) error {
	quoted := make([]string, 0, len(values))
	for _, v := range values {
		quoted = append(quoted, strconv.Quote(string(v)))
	}

	return fmt.Errorf("%s %s: not %s or empty", name, quote(string(value)), strings.Join(quoted, ", "))
}

// checkTags says what talos-ccm cannot take of the tags, by key: the error reads the same every time.
func checkTags(name string, tags map[string]string) problems {
	var errs problems

	if len(tags) > maxTags {
		errs = append(errs, fmt.Errorf("%s: %d tags, more than %d", name, len(tags), maxTags))
	}

	for _, k := range slices.Sorted(maps.Keys(tags)) {
		if err := checkText("tag key "+quote(k), k); err != nil {
			errs = append(errs, err)
		}

		if err := checkText(name+"["+quote(k)+"]", tags[k]); err != nil {
			errs = append(errs, err)
		}
	}

	return errs
}

// checkText says why a text field cannot be taken, or returns nil.
func checkText(name, value string) error {
	switch {
	case len(value) > maxFieldLength:
		return fmt.Errorf("%s: %d bytes, more than %d", name, len(value), maxFieldLength)
	case !utf8.ValidString(value):
		return fmt.Errorf("%s: not valid UTF-8", name)
	case strings.ContainsFunc(value, isControl):
		return fmt.Errorf("%s: contains a control character", name)
	default:
		return nil
	}
}

// isControl reports the characters that talos-ccm strips from a Talos machine's facts.
func isControl(r rune) bool {
	return r < 0x20 || r == 0x7f
}

// quote quotes a value of the host in an error, shortened to stay readable.
func quote(s string) string {
	return fmt.Sprintf("%q", shorten(s))
}

// shorten keeps a value readable in an error.
func shorten(s string) string {
	const most = 64

	if len(s) <= most {
		return s
	}

	return fmt.Sprintf("%s... (%d bytes)", strings.ToValidUTF8(s[:most], ""), len(s))
}

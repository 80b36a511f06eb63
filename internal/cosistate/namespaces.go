package cosistate

import (
	"errors"
	"fmt"
	"regexp"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/resource/meta"

	"github.com/talos-ccm/talos-ccm/internal/resources"
)

// NamespacePrefixSeparator ends every namespace prefix: the prefix "cluster-a:" stores the namespace "talos"
// as "cluster-a:talos" in the host's state. It is the separator Omni uses in its own parametrized
// namespaces, and it appears neither in talos-ccm's namespaces nor in a DNS label, so a prefixed namespace
// always reads back as one prefix and one namespace.
const NamespacePrefixSeparator = ":"

// namespacePrefixPattern is a DNS label (lowercase letters, digits and '-', at most 63 characters, starting
// and ending with a letter or digit) followed by the separator.
var namespacePrefixPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?` + regexp.QuoteMeta(NamespacePrefixSeparator) + `$`)

// ValidateNamespacePrefix checks a namespace prefix: a DNS label, such as a cluster name, followed by
// NamespacePrefixSeparator, as in "cluster-a:". The empty prefix is valid: no prefix.
func ValidateNamespacePrefix(prefix string) error {
	if prefix == "" || namespacePrefixPattern.MatchString(prefix) {
		return nil
	}

	return fmt.Errorf("invalid namespace prefix %q: want a DNS label (lowercase letters, digits and '-', at most 63 characters) followed by %q, such as \"cluster-a%s\"",
		prefix, NamespacePrefixSeparator, NamespacePrefixSeparator)
}

// HostNamespace returns the namespace that stores talos-ccm's namespace ns (such as "talos") in the host's
// state, for the pipeline of the given prefix: prefix followed by ns.
func HostNamespace(prefix string, ns resource.Namespace) resource.Namespace {
	return prefix + ns
}

// PrefixedNamespace is one namespace of a talos-ccm pipeline, as a host's state stores it.
type PrefixedNamespace struct {
	// Name is the namespace in the host's state: the prefix followed by Namespace.
	Name resource.Namespace
	// Namespace is the namespace talos-ccm's controllers see ("talos", "node", "meta", ...).
	Namespace resource.Namespace
	// Description says what the namespace holds.
	Description string
	// Persisted namespaces hold decisions that should survive a restart of the host (talos-ccm keeps them
	// in sqlite); the others are rebuilt from their sources and belong in memory.
	Persisted bool
}

// PrefixedNamespaces lists every namespace of the pipeline of the given prefix as the host's state stores
// it, with whether it should be persisted, so that the host's namespaced state builder can route each to a backend: persisted ones to a database, the others to
// memory (see MemoryStateBuilder). The list includes "meta", where a pipeline
// registers its namespace and resource definitions unless told not to (ccm.Options.SkipResourceDefinitions:
// a host's clusters keep theirs once, in the host's own "meta"). The empty prefix lists talos-ccm's own namespaces.
func PrefixedNamespaces(prefix string) ([]PrefixedNamespace, error) {
	if err := ValidateNamespacePrefix(prefix); err != nil {
		return nil, err
	}

	out := []PrefixedNamespace{{
		Name:        HostNamespace(prefix, meta.NamespaceName),
		Namespace:   meta.NamespaceName,
		Description: "Namespace and resource definitions.",
	}}

	for _, ns := range resources.Namespaces() {
		out = append(out, PrefixedNamespace{
			Name:        HostNamespace(prefix, ns.Name),
			Namespace:   ns.Name,
			Description: ns.Description,
			Persisted:   ns.Persisted,
		})
	}

	return out, nil
}

// ErrNamespaceOutsideView is the error (tested with errors.Is) of a prefixed view of a host's state
// (NewPrefixedState) asked for a namespace that is not one of talos-ccm's: the host's own namespaces and
// those of other prefixes are out of the view's reach.
var ErrNamespaceOutsideView = errors.New("namespace outside of the prefixed view")

package k8ssink

import (
	"maps"
	"strings"
	"sync"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/rules"
)

// OwnLabelPrefix is the namespace of the labels talos-ccm sets by itself (platform, lifecycle, cluster name).
const OwnLabelPrefix = "node.cloudprovider.kubernetes.io/"

// RemovableKeys are the keys a kubelet may not change itself (NodeRestriction-protected labels, and every
// taint) that talos-ccm may remove when it recorded them as its own and no longer wants them: those its
// configuration in force can set. The records of what talos-ccm owns are annotations on the Node, and a
// kubelet can write its Node's annotations: were every recorded key removable, a kubelet could list an
// operator's taint or protected label there and have talos-ccm remove what NodeRestriction keeps it from
// removing. Keys a kubelet may change itself are removed whenever recorded: listing them gains it nothing.
type RemovableKeys struct {
	// Labels are the protected label keys the configuration can set.
	Labels map[string]bool
	// Taints are the taint keys the configuration can set.
	Taints map[string]bool
}

// RemovableKeysOf returns the keys the configuration's transformation rules can set (whatever their
// selectors and templates give), and talos-ccm's own labels.
func RemovableKeysOf(cfg *specs.ConfigSpec) RemovableKeys {
	keys := RemovableKeys{Labels: map[string]bool{}, Taints: map[string]bool{}}

	for _, rule := range cfg.GetTransformations() {
		for key := range rule.GetLabels() {
			keys.Labels[key] = true
		}

		for key := range rule.GetTaints() {
			keys.Taints[key] = true
		}
	}

	return keys
}

// label reports whether talos-ccm may remove the label key it recorded as its own.
func (k RemovableKeys) label(key string) bool {
	return !rules.IsProtectedLabel(key) || strings.HasPrefix(key, OwnLabelPrefix) || k.Labels[key]
}

// taint reports whether talos-ccm may remove a taint of the key it recorded as its own.
func (k RemovableKeys) taint(key string) bool {
	return k.Taints[key]
}

// removableSeen keeps the keys of every configuration seen since talos-ccm started, so that the taints and
// protected labels of a rule removed from the configuration are still removed from the Nodes (after a
// restart, only those of the configuration in force are). The keys are merged once per version of the
// configuration, not at every apply, and never changed once returned: callers only read them.
type removableSeen struct {
	mu      sync.Mutex
	version string
	keys    RemovableKeys
}

// observe adds the keys the configuration of this version can set and returns every key seen so far.
func (s *removableSeen) observe(version string, cfg *specs.ConfigSpec) RemovableKeys {
	s.mu.Lock()
	defer s.mu.Unlock()

	if s.keys.Labels != nil && version == s.version {
		return s.keys
	}

	merged := RemovableKeysOf(cfg)
	maps.Copy(merged.Labels, s.keys.Labels)
	maps.Copy(merged.Taints, s.keys.Taints)

	s.version, s.keys = version, merged

	return merged
}

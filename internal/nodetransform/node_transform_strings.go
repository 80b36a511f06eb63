package nodetransform

import (
	"strings"
	"sync"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
	"github.com/talos-ccm/talos-ccm/internal/resources/node"
)

// Limits of the shared strings: the table takes strings of at most maxSharedLen bytes until it holds
// maxShared of them. What a NodeTransform repeats from Node to Node (label keys and values of the
// well-known labels, the origins of labels and facts, the platform) is a few hundred strings in the
// largest cluster; the limits keep a stream of values that differ per Node (a rule's template of the
// hostname, say) from growing the table without end, at the price of not sharing what comes after.
const (
	maxShared    = 4096
	maxSharedLen = 128
)

// sharedStrings holds one copy of each string that NodeTransforms repeat from Node to Node. Build puts
// together the origins ("label/" + key, "Talos platformMetadata." + fact) and reads the label values from
// each machine's facts, so every NodeTransform carried copies of its own of the same strings: about 550
// bytes of each NodeTransform's 2.9 KB in the state, at a dozen origins per Node. The table is shared by
// every cluster of the process, whose Nodes carry the same keys.
var sharedStrings = &stringTable{strings: map[string]string{}}

// stringTable hands out one copy of each string it holds. It is safe for concurrent use.
type stringTable struct {
	mu      sync.RWMutex
	strings map[string]string
}

// share returns the table's copy of s, which it takes when it has none and has room.
func (t *stringTable) share(s string) string {
	if s == "" || len(s) > maxSharedLen {
		return s
	}

	t.mu.RLock()
	held, ok := t.strings[s]
	t.mu.RUnlock()

	if ok {
		return held
	}

	t.mu.Lock()
	defer t.mu.Unlock()

	if held, ok = t.strings[s]; ok {
		return held
	}

	if len(t.strings) >= maxShared {
		return s
	}

	// A copy of its own, so that the table never holds on to a larger string s was cut from.
	s = strings.Clone(s)
	t.strings[s] = s

	return s
}

// shareStrings replaces the strings of spec that repeat from Node to Node with the table's copies: the
// labels, the origins (but the keys of addresses, which name each Node's own addresses) and the platform.
func (t *stringTable) shareStrings(spec *specs.NodeTransformSpec) {
	for k, v := range spec.GetLabels() {
		spec.Labels[k] = t.share(v)
	}

	if len(spec.GetOrigins()) > 0 {
		origins := make(map[string]string, len(spec.GetOrigins()))

		for k, v := range spec.GetOrigins() {
			if !strings.HasPrefix(k, node.OriginKindAddress+"/") {
				k = t.share(k)
			}

			origins[k] = t.share(v)
		}

		spec.Origins = origins
	}

	spec.Platform = t.share(spec.GetPlatform())
}

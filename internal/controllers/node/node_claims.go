package node

import (
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"
)

// Claim is one Node's claim on machines, providerIDs and addresses: what it is given only if no other
// Node holds it.
type Claim struct {
	// Created is when the Node was created.
	Created time.Time
	// Node is the Node's name.
	Node string
	// Keys are what the Node claims (its machine, providerID and addresses), each with whether the Node
	// already carries it (the providerID in its spec when it is the one its verified machine gives; a
	// machine and an address once the Node is initialized).
	Keys map[claimKey]bool
	// Current is false while the Node keeps facts read before: its kubelet now points at a machine that
	// is another node, so its claim is not renewed by its machine.
	Current bool
}

// claimKind is what a claim key names.
type claimKind uint8

// The kinds of claim keys, in the order a claim's conflicts are looked for.
const (
	claimIP claimKind = iota
	claimMachine
	claimProviderID
)

// claimKey is one thing a Node claims: its value is the NodeTransform's own string (the machine's key, the
// providerID, an address), which the registry keeps for as long as the Node is bound instead of a copy
// with the kind spelled in front.
type claimKey struct {
	value string
	kind  claimKind
}

// String spells the key as "ip/<address>", "machine/<key>" or "providerID/<id>".
func (k claimKey) String() string {
	return [...]string{claimIP: "ip", claimMachine: "machine", claimProviderID: "providerID"}[k.kind] + "/" + k.value
}

// compareClaimKeys orders keys by kind, then value.
func compareClaimKeys(a, b claimKey) int {
	if a.kind != b.kind {
		return int(a.kind) - int(b.kind)
	}

	return strings.Compare(a.value, b.value)
}

// claimant is one Node's claim on one key.
type claimant struct {
	// created is when the Node was created, in nanoseconds since the epoch.
	created int64
	node    string
	held    bool
	current bool
	// refused is whether the Node's claim was refused when it was bound: a Node that was given what it
	// claims has its decision made again when a stronger claim comes (see bind).
	refused bool
}

// stronger orders two claimants of one key: a claim its machine renews beats one kept from before, a
// key the Node already carries beats one it does not, then the older Node, then the name. The order
// depends only on the claims, never on which was seen first, so every restart reaches the same winner.
func stronger(a, b claimant) bool {
	switch {
	case a.current != b.current:
		return a.current
	case a.held != b.held:
		return a.held
	case a.created != b.created:
		return a.created < b.created
	default:
		return a.node < b.node
	}
}

// claimConflict returns the first of claim's keys that a stronger claimant holds, described, or ""; and
// whether any key of claim has another claimant at all (contested: the winner may change as the others
// are seen). others gives the claimants of a key.
func claimConflict(claim Claim, others func(key claimKey) iter.Seq[claimant]) (string, bool) {
	contested := false

	for _, key := range slices.SortedFunc(maps.Keys(claim.Keys), compareClaimKeys) {
		self := claimant{node: claim.Node, created: claim.Created.UnixNano(), held: claim.Keys[key], current: claim.Current}

		for other := range others(key) {
			if other.node == claim.Node {
				continue
			}

			contested = true

			if stronger(other, self) {
				return fmt.Sprintf("%s is Node %s's: one machine, providerID and address belong to one Node", describeKey(key), other.node), true
			}
		}
	}

	return "", contested
}

// describeKey turns a claim key into words.
func describeKey(key claimKey) string {
	switch key.kind {
	case claimMachine:
		return "machine " + key.value
	case claimProviderID:
		return "providerID " + key.value
	default:
		return "address " + key.value
	}
}

// claimRegistry holds every Node's claim, so that a second Node claiming a machine, a providerID or an
// address that another Node holds is refused. It is safe for concurrent use.
//
// It holds a claim of every Node, a few keys each, for as long as talos-ccm runs: each Node's claim is kept
// once (heldClaim), and each key refers to it. A key almost always has one claimant: the first is held in
// byKey, and the others, when there are any, in rivals. The keys' values are the NodeTransforms' strings,
// not copies (claimOf).
type claimRegistry struct {
	mu     sync.Mutex
	byKey  map[claimKey]*heldClaim
	rivals map[claimKey][]*heldClaim
	byNode map[string]*heldClaim
}

// heldClaim is one Node's claim as the registry keeps it: its keys, those the Node carries first.
type heldClaim struct {
	node string
	keys []claimKey
	// created is when the Node was created, in nanoseconds since the epoch.
	created int64
	// carried is how many of keys, the first ones, the Node carries.
	carried int32
	current bool
	refused bool
}

// claimant returns the claim on key, one of the claim's keys.
func (c *heldClaim) claimant(key claimKey) claimant {
	return claimant{
		created: c.created, node: c.node, held: slices.Index(c.keys[:c.carried], key) >= 0, current: c.current, refused: c.refused,
	}
}

func newClaimRegistry() *claimRegistry {
	return &claimRegistry{byKey: map[claimKey]*heldClaim{}, rivals: map[claimKey][]*heldClaim{}, byNode: map[string]*heldClaim{}}
}

// claimants returns the claimants of a key, in the order they were bound.
func (r *claimRegistry) claimants(key claimKey) iter.Seq[claimant] {
	return func(yield func(claimant) bool) {
		first, ok := r.byKey[key]
		if !ok || !yield(first.claimant(key)) {
			return
		}

		for _, rival := range r.rivals[key] {
			if !yield(rival.claimant(key)) {
				return
			}
		}
	}
}

// bind records claim (replacing the Node's previous one) and returns what refuses it, or ""; whether any of
// its keys is contested; and the Nodes it displaces: those that were given a key of it (their claim was not
// refused when it was bound) and whose claim on it is weaker. The claims are seen one Node at a time, in any
// order (after a restart, as facts arrive): a Node given a key before a stronger claimant was seen holds a
// decision that is no longer right, and must be decided again.
func (r *claimRegistry) bind(claim Claim) (conflict string, contested bool, displaced []string) {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.removeLocked(claim.Node)

	// Judged against the other Nodes' claims, before this one joins them.
	conflict, contested = claimConflict(claim, r.claimants)
	displaced = displacedBy(claim, r.claimants)

	held := &heldClaim{
		created: claim.Created.UnixNano(), node: claim.Node, current: claim.Current, refused: conflict != "",
		keys: make([]claimKey, 0, len(claim.Keys)),
	}

	for key, carried := range claim.Keys {
		if carried {
			held.keys = append(held.keys, key)
		}
	}

	held.carried = int32(len(held.keys)) //nolint:gosec // a Node claims a machine, a providerID and its addresses

	for key, carried := range claim.Keys {
		if !carried {
			held.keys = append(held.keys, key)
		}
	}

	for _, key := range held.keys {
		if _, taken := r.byKey[key]; taken {
			r.rivals[key] = append(r.rivals[key], held)
		} else {
			r.byKey[key] = held
		}
	}

	r.byNode[claim.Node] = held

	return conflict, contested, displaced
}

// displacedBy returns, sorted, the Nodes given a key of claim whose claim on it is weaker than claim's.
func displacedBy(claim Claim, others func(key claimKey) iter.Seq[claimant]) []string {
	var displaced []string

	for key, held := range claim.Keys {
		self := claimant{node: claim.Node, created: claim.Created.UnixNano(), held: held, current: claim.Current}

		for other := range others(key) {
			if other.node != claim.Node && !other.refused && stronger(self, other) && !slices.Contains(displaced, other.node) {
				displaced = append(displaced, other.node)
			}
		}
	}

	slices.Sort(displaced)

	return displaced
}

// remove forgets the claim of a Node.
func (r *claimRegistry) remove(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()

	r.removeLocked(node)
}

func (r *claimRegistry) removeLocked(node string) {
	held, ok := r.byNode[node]
	if !ok {
		return
	}

	for _, key := range held.keys {
		rivals := r.rivals[key]

		if r.byKey[key] == held {
			if len(rivals) == 0 {
				delete(r.byKey, key)

				continue
			}

			// The next claimant, in the order they were bound, takes the first place.
			r.byKey[key] = rivals[0]
			rivals = slices.Delete(rivals, 0, 1)
		} else {
			rivals = slices.DeleteFunc(rivals, func(c *heldClaim) bool { return c == held })
		}

		if len(rivals) == 0 {
			delete(r.rivals, key)
		} else {
			r.rivals[key] = rivals
		}
	}

	delete(r.byNode, node)
}

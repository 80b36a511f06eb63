package node

import (
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/talos-ccm/talos-ccm/api/proto/specs"
)

func TestClaimConflict(t *testing.T) {
	t.Parallel()

	old, young := time.Unix(1000, 0), time.Unix(2000, 0)

	for _, tc := range []struct {
		name      string
		claim     Claim
		others    map[string][]claimant
		conflict  string
		contested bool
	}{
		{
			name:  "alone",
			claim: Claim{Node: "b", Created: young, Current: true, Keys: keysOf(map[string]bool{"machine/uuid/u1": false})},
		},
		{
			name:      "an older Node holds the machine: refused",
			claim:     Claim{Node: "b", Created: young, Current: true, Keys: keysOf(map[string]bool{"machine/uuid/u1": false})},
			others:    map[string][]claimant{"machine/uuid/u1": {{node: "a", created: old.UnixNano(), current: true}}},
			conflict:  "machine uuid/u1 is Node a's: one machine, providerID and address belong to one Node",
			contested: true,
		},
		{
			name:      "a younger Node claims the same machine: this one keeps it",
			claim:     Claim{Node: "a", Created: old, Current: true, Keys: keysOf(map[string]bool{"machine/uuid/u1": false})},
			others:    map[string][]claimant{"machine/uuid/u1": {{node: "b", created: young.UnixNano(), current: true}}},
			contested: true,
		},
		{
			name:      "the Node that carries the providerID wins over an older one",
			claim:     Claim{Node: "a", Created: old, Current: true, Keys: keysOf(map[string]bool{"providerID/x://1": false})},
			others:    map[string][]claimant{"providerID/x://1": {{node: "b", created: young.UnixNano(), held: true, current: true}}},
			conflict:  "providerID x://1 is Node b's: one machine, providerID and address belong to one Node",
			contested: true,
		},
		{
			name:      "a claim its machine renews wins over one kept from before (a machine renamed)",
			claim:     Claim{Node: "old-name", Created: old, Current: false, Keys: keysOf(map[string]bool{"ip/10.0.0.5": true})},
			others:    map[string][]claimant{"ip/10.0.0.5": {{node: "new-name", created: young.UnixNano(), current: true}}},
			conflict:  "address 10.0.0.5 is Node new-name's: one machine, providerID and address belong to one Node",
			contested: true,
		},
		{
			name:      "same age: the name decides, the same way every time",
			claim:     Claim{Node: "b", Created: old, Current: true, Keys: keysOf(map[string]bool{"machine/ip/10.0.0.5": false})},
			others:    map[string][]claimant{"machine/ip/10.0.0.5": {{node: "a", created: old.UnixNano(), current: true}}},
			conflict:  "machine ip/10.0.0.5 is Node a's: one machine, providerID and address belong to one Node",
			contested: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			conflict, contested := claimConflict(tc.claim, claimantsIn(tc.others))
			assert.Equal(t, tc.conflict, conflict)
			assert.Equal(t, tc.contested, contested)
		})
	}
}

// claimantsIn gives the claimants of a key in others, by its spelling.
func claimantsIn(others map[string][]claimant) func(claimKey) iter.Seq[claimant] {
	return func(key claimKey) iter.Seq[claimant] { return slices.Values(others[key.String()]) }
}

// keysOf returns the claim keys spelled "ip/<address>", "machine/<key>" or "providerID/<id>".
func keysOf(spelled map[string]bool) map[claimKey]bool {
	kinds := map[string]claimKind{"ip": claimIP, "machine": claimMachine, "providerID": claimProviderID}
	keys := make(map[claimKey]bool, len(spelled))

	for s, held := range spelled {
		kind, value, _ := strings.Cut(s, "/")
		keys[claimKey{kind: kinds[kind], value: value}] = held
	}

	return keys
}

func TestClaimRegistry(t *testing.T) {
	t.Parallel()

	r := newClaimRegistry()
	old, young := time.Unix(1000, 0), time.Unix(2000, 0)

	victim := Claim{Node: "victim", Created: old, Current: true, Keys: keysOf(map[string]bool{"machine/uuid/u1": true, "providerID/x://1": true})}
	second := Claim{Node: "second", Created: young, Current: true, Keys: keysOf(map[string]bool{"machine/uuid/u1": false, "providerID/x://1": false})}

	conflict, _, _ := r.bind(victim)
	assert.Empty(t, conflict)

	conflict, contested, _ := r.bind(second)
	assert.Contains(t, conflict, "is Node victim's")
	assert.True(t, contested)

	// Binding again replaces the Node's claim instead of adding to it.
	conflict, _, displaced := r.bind(victim)
	assert.Empty(t, conflict)
	assert.Empty(t, displaced, "the other claimant was refused: nothing to decide again")

	r.remove("victim")

	conflict, contested, _ = r.bind(second)
	assert.Empty(t, conflict, "once the holder is gone the other claimant gets the machine")
	assert.False(t, contested)

	r.remove("second")
	assert.Empty(t, r.byKey)
	assert.Empty(t, r.rivals)
	assert.Empty(t, r.byNode)
}

// TestClaimRegistryDisplaced: the claims are seen one Node at a time, in any order. A weaker claim seen
// first is given the machine; the stronger one, seen after, displaces it, and says so, so that the weaker
// Node's decision is made again (and refused then); once it is refused it is displaced no more.
func TestClaimRegistryDisplaced(t *testing.T) {
	t.Parallel()

	r := newClaimRegistry()
	old, young := time.Unix(1000, 0), time.Unix(2000, 0)

	older := Claim{Node: "older", Created: old, Current: true, Keys: keysOf(map[string]bool{"machine/uuid/u1": false, "ip/10.0.0.1": false})}
	younger := Claim{Node: "younger", Created: young, Current: true, Keys: keysOf(map[string]bool{"machine/uuid/u1": false, "ip/10.0.0.2": false})}

	conflict, contested, displaced := r.bind(younger)
	assert.Empty(t, conflict, "seen first, alone")
	assert.False(t, contested)
	assert.Empty(t, displaced)

	conflict, contested, displaced = r.bind(older)
	assert.Empty(t, conflict, "the older claim is the stronger")
	assert.True(t, contested)
	assert.Equal(t, []string{"younger"}, displaced, "the younger Node was given the machine: decide it again")

	conflict, _, displaced = r.bind(younger)
	assert.Contains(t, conflict, "is Node older's")
	assert.Empty(t, displaced)

	_, _, displaced = r.bind(older)
	assert.Empty(t, displaced, "the younger Node is refused now")
}

func TestClaimOfProviderID(t *testing.T) {
	t.Parallel()

	const (
		own   = "talos://metal/10.0.0.2"
		other = "talos://metal/10.0.0.1"
	)

	for _, tc := range []struct {
		name string
		// carried is the providerID in the Node's spec; gives is the one its verified machine gives.
		carried, gives string
		want           map[string]bool
	}{
		{
			name:  "not carried yet: claimed, not held",
			gives: own,
			want:  map[string]bool{"providerID/" + own: false},
		},
		{
			name:    "carried and its machine gives it: held",
			carried: own,
			gives:   own,
			want:    map[string]bool{"providerID/" + own: true},
		},
		{
			name:    "carried but its machine gives another: the carried one is no claim",
			carried: other,
			gives:   own,
			want:    map[string]bool{"providerID/" + own: false},
		},
		{
			name:    "carried while its machine gives none yet: no providerID claim",
			carried: other,
			want:    map[string]bool{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			kn := &specs.KubeNodeSpec{ProviderId: tc.carried, Created: timestamppb.New(time.Unix(1000, 0))}
			claim := claimOf("n", kn, &specs.NodeTransformSpec{Verified: true, Machine: "uuid/u1", ProviderId: tc.gives}, true)

			providerIDs := map[string]bool{}

			for key, held := range claim.Keys {
				if key.kind == claimProviderID {
					providerIDs[key.String()] = held
				}
			}

			assert.Equal(t, tc.want, providerIDs)
		})
	}
}

// A Node registered by its kubelet with the victim's providerID, untainted and older than the victim, never
// keeps the victim from it, whichever claim is seen first; the victim's recheck (a contested claim is
// bound again) must not turn either.
func TestClaimsSquattedProviderID(t *testing.T) {
	t.Parallel()

	const victimID = "talos://metal/10.0.0.1"

	old, young := time.Unix(1000, 0), time.Unix(2000, 0)

	squatter := claimOf("squatter",
		&specs.KubeNodeSpec{ProviderId: victimID, Created: timestamppb.New(old)},
		&specs.NodeTransformSpec{Verified: true, Machine: "uuid/squatter", ProviderId: "talos://metal/10.0.0.2"}, true)

	for _, tc := range []struct {
		name string
		// carried is the victim's providerID in its spec: none while it waits, its own once initialized.
		carried string
		first   string
	}{
		{name: "squatter first, victim waiting", first: "squatter"},
		{name: "victim first, victim waiting", first: "victim"},
		{name: "squatter first, victim initialized", carried: victimID, first: "squatter"},
		{name: "victim first, victim initialized", carried: victimID, first: "victim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()

			victim := claimOf("victim",
				&specs.KubeNodeSpec{ProviderId: tc.carried, Uninitialized: tc.carried == "", Created: timestamppb.New(young)},
				&specs.NodeTransformSpec{Verified: true, Machine: "uuid/victim", ProviderId: victimID}, true)

			r := newClaimRegistry()
			order := []Claim{squatter, victim}

			if tc.first == "victim" {
				order = []Claim{victim, squatter}
			}

			for _, claim := range append(order, victim) {
				conflict, contested, _ := r.bind(claim)
				assert.Empty(t, conflict, "%s", claim.Node)
				assert.False(t, contested, "the squatter claims nothing of the victim's: %s", claim.Node)
			}
		})
	}
}

package cosistate

import (
	"slices"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
	"github.com/cosi-project/runtime/pkg/state/impl/namespaced"
)

// inMemoryHistory is how many events each in-memory collection keeps for its watchers, and
// inMemoryHistoryGap how many of them a watch may not start from (a bookmark or the tail must lie at least
// that far inside the history; it must stay below inMemoryHistoryInitial).
// Every event holds the version of the resource it made and the one it replaced, so the history keeps up
// to twice that many versions of each type alive: at 1,024, 26 MiB of peak memory more than at 128 while
// 1,000 Nodes joined. A watcher that falls further behind is resumed (see resumingState): a burst longer
// than the history costs a fresh read of the type and a reconcile of each resource it changed, not a
// failure, so the history is sized for memory. A collection starts with inMemoryHistoryInitial events and
// doubles its history each time it fills, up to the full history: a type written a few times (most types
// of an idle cluster of a host's, some never written but watched) keeps a few events, not the full ring.
// Each event of a history costs 80 bytes even when empty: at 64 to start with, the eighteen or so
// collections of an embedded cluster held 92 KiB before a single Node; at 4, 6 KiB. Nothing in talos-ccm
// watches these namespaces from a bookmark or the tail, which the gap is for.
const (
	inMemoryHistory        = 256
	inMemoryHistoryGap     = 2
	inMemoryHistoryInitial = 4
)

// MemoryStateBuilder returns a builder of in-memory namespaces (for namespaced.NewState) whose watches are
// resumed when they fall behind the history (see resumingState), and whose reads share the stored resources
// instead of copying them (see sharedReads: what is read must not be changed): what a host's state builder
// should give the namespaces of PrefixedNamespaces, with its own options (inmem.WithBackingStore for the
// persisted ones) as extra.
//
// Every namespace has an index of its stored resources of its own, so that a namespace dropped (see
// ReleasableNamespaces) takes its index along.
func MemoryStateBuilder(extra ...inmem.StateOption) namespaced.StateBuilder {
	var host inmem.StateOptions

	for _, opt := range extra {
		opt(&host)
	}

	options := slices.Concat(memoryStateOptions(), extra)

	return func(ns resource.Namespace) state.CoreState {
		stored := newStoredIndex(host.BackingStore)
		memory := inmem.NewStateWithOptions(append(slices.Clip(options), inmem.WithBackingStore(stored))...)

		return &resumingState{CoreState: &sharedReads{CoreState: memory(ns), stored: stored}}
	}
}

// memoryStateOptions are the history options of MemoryStateBuilder's in-memory namespaces: alone, they
// would give a state whose watches are not resumed, too short a history for the bursts of a large cluster.
func memoryStateOptions() []inmem.StateOption {
	return []inmem.StateOption{
		inmem.WithHistoryInitialCapacity(inMemoryHistoryInitial),
		inmem.WithHistoryMaxCapacity(inMemoryHistory),
		inmem.WithHistoryGap(inMemoryHistoryGap),
	}
}

// NewMemoryState returns an empty in-memory state for one cluster's pipeline, with a watch history long
// enough for the bursts of Node events of a large cluster (MemoryStateBuilder).
func NewMemoryState() state.State {
	return state.WrapCore(namespaced.NewState(MemoryStateBuilder()))
}

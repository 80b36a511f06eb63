package cosistate

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cosi-project/runtime/pkg/resource"
	"github.com/cosi-project/runtime/pkg/state"
	"github.com/cosi-project/runtime/pkg/state/impl/inmem"
)

// memoryCollection holds the resources of one type of a memoryState, and its watches.
//
// It stores what it is given to write as a copy, once, and never changes a resource it stored: a write
// stores a new copy. Reads and events hand out the stored resources themselves, not copies: whoever reads
// must not change what it got, and copies it first to change it (state.UpdateWithConflicts and
// safe.WriterModify do). The COSI runtime's in-memory state copied every resource it returned from a read,
// and the controller runtime reads its inputs and outputs on every reconcile: at 5,000 joining Nodes those
// copies were a fifth of talos-ccm's allocations.
type memoryCollection struct {
	ns  resource.Namespace
	typ resource.Type

	mu  sync.RWMutex
	res map[resource.ID]resource.Resource
	// copies are copies of the stored resources, taken as they were stored, when checkSharedReads is set.
	copies  map[resource.ID]resource.Resource
	watches []*memoryWatch
	// peak is the most resources res held since it was last made anew (see remove).
	peak int
}

func newMemoryCollection(ns resource.Namespace, typ resource.Type) *memoryCollection {
	c := &memoryCollection{ns: ns, typ: typ, res: map[resource.ID]resource.Resource{}}

	if checkSharedReads {
		c.copies = map[resource.ID]resource.Resource{}
	}

	return c
}

// get returns the stored resource of id, not to be changed.
func (c *memoryCollection) get(id resource.ID) (resource.Resource, error) { //nolint:ireturn
	c.mu.RLock()
	res, ok := c.res[id]
	c.mu.RUnlock()

	if !ok {
		return nil, &notFoundError{ns: c.ns, typ: c.typ, id: id}
	}

	return res, nil
}

// list returns the stored resources that the options select, sorted by ID, not to be changed.
func (c *memoryCollection) list(options *state.ListOptions) []resource.Resource {
	c.mu.RLock()

	items := make([]resource.Resource, 0, len(c.res))

	for _, res := range c.res {
		if options.IDQuery.Matches(*res.Metadata()) && options.LabelQueries.Matches(*res.Metadata().Labels()) {
			items = append(items, res)
		}
	}

	c.mu.RUnlock()

	slices.SortFunc(items, func(a, b resource.Resource) int { return strings.Compare(a.Metadata().ID(), b.Metadata().ID()) })

	return items
}

// store stores res as the resource of its ID. c.mu is held.
func (c *memoryCollection) store(res resource.Resource) {
	id := res.Metadata().ID()

	c.checkUnchanged(id)
	c.res[id] = res
	c.peak = max(c.peak, len(c.res))

	if c.copies != nil {
		c.copies[id] = res.DeepCopy()
	}
}

// shrinkFrom is the size from which a collection that lost three quarters of its resources moves the rest
// to a map of their size (see remove).
const shrinkFrom = 64

// remove drops the stored resource of id. c.mu is held.
//
// A Go map keeps the room of its deleted entries: a collection that held the Clusters of a thousand
// clusters, the Nodes of a cluster that shrank, or the Nodes of a removed cluster's namespace that a host
// keeps, would keep that room for good. Once a collection holds a quarter of its peak, what is left moves
// to a map of its size, which costs O(1) per removal over time.
func (c *memoryCollection) remove(id resource.ID) {
	c.checkUnchanged(id)
	delete(c.res, id)
	delete(c.copies, id)

	if c.peak < shrinkFrom || len(c.res) > c.peak/4 {
		return
	}

	c.res = maps.Collect(maps.All(c.res))
	c.peak = len(c.res)

	if c.copies != nil {
		c.copies = maps.Collect(maps.All(c.copies))
	}
}

// create stores a copy of res, owned by owner, at the first version, and sets res's metadata to the
// stored one's. The backing store, if any, takes it first: if it refuses, nothing is stored.
func (c *memoryCollection) create(ctx context.Context, res resource.Resource, owner string, backing inmem.BackingStore) error {
	stored := res.DeepCopy()

	if err := stored.Metadata().SetOwner(owner); err != nil {
		return err //nolint:wrapcheck // The COSI runtime's own error, as its in-memory state returns it.
	}

	c.mu.Lock()
	defer c.mu.Unlock()

	if _, exists := c.res[stored.Metadata().ID()]; exists {
		return inmem.ErrAlreadyExists(stored.Metadata())
	}

	stored.Metadata().SetVersion(resource.VersionUndefined.Next())
	stored.Metadata().SetCreated(time.Now())

	if backing != nil {
		if err := backing.Put(ctx, c.typ, stored); err != nil {
			return fmt.Errorf("failed to store %s: %w", resource.String(stored), err)
		}
	}

	c.store(stored)
	c.publish(state.Event{Type: state.Created, Resource: stored})

	// The caller's resource takes the stored one's metadata (labels, annotations and finalizers share
	// their storage copy-on-write), as the COSI runtime's in-memory state does.
	*res.Metadata() = *stored.Metadata()

	return nil
}

// update stores a copy of res in place of the stored resource of its ID, if that one is at res's version,
// owned by the options' owner, in the expected phase; res's metadata is set to the stored one's.
func (c *memoryCollection) update(ctx context.Context, res resource.Resource, options *state.UpdateOptions, backing inmem.BackingStore) error {
	stored := res.DeepCopy()
	md := stored.Metadata()

	c.mu.Lock()
	defer c.mu.Unlock()

	current, exists := c.res[md.ID()]
	if !exists {
		return inmem.ErrNotFound(md)
	}

	if current.Metadata().Owner() != options.Owner {
		return inmem.ErrOwnerConflict(current.Metadata(), current.Metadata().Owner())
	}

	if !current.Metadata().Version().Equal(md.Version()) {
		return inmem.ErrVersionConflict(current.Metadata(), md.Version(), current.Metadata().Version())
	}

	if options.ExpectedPhase != nil && current.Metadata().Phase() != *options.ExpectedPhase {
		return inmem.ErrPhaseConflict(current.Metadata(), *options.ExpectedPhase)
	}

	md.SetVersion(md.Version().Next())
	md.SetUpdated(time.Now())
	md.SetCreated(current.Metadata().Created())

	if backing != nil {
		if err := backing.Put(ctx, c.typ, stored); err != nil {
			return fmt.Errorf("failed to store %s: %w", resource.String(stored), err)
		}
	}

	c.store(stored)
	c.publish(state.Event{Type: state.Updated, Resource: stored, Old: current})

	*res.Metadata() = *md

	return nil
}

// destroy drops the stored resource of ptr's ID, if owned by owner and without finalizers.
func (c *memoryCollection) destroy(ctx context.Context, ptr resource.Pointer, owner string, backing inmem.BackingStore) error {
	c.mu.Lock()
	defer c.mu.Unlock()

	current, exists := c.res[ptr.ID()]
	if !exists {
		return inmem.ErrNotFound(ptr)
	}

	if current.Metadata().Owner() != owner {
		return inmem.ErrOwnerConflict(current.Metadata(), current.Metadata().Owner())
	}

	if !current.Metadata().Finalizers().Empty() {
		return inmem.ErrPendingFinalizers(*current.Metadata())
	}

	if backing != nil {
		if err := backing.Destroy(ctx, c.typ, ptr); err != nil {
			return fmt.Errorf("failed to destroy %s: %w", resource.String(current), err)
		}
	}

	c.remove(ptr.ID())
	c.publish(state.Event{Type: state.Destroyed, Resource: current})

	return nil
}

// publish queues ev for every watch that selects it. c.mu is held (for writing): the watches get the
// events of the type in the order they were made.
func (c *memoryCollection) publish(ev state.Event) {
	for _, w := range c.watches {
		if filtered, ok := w.filter(ev); ok {
			w.enqueue(filtered)
		}
	}
}

// watch adds w, with what it starts with queued (the contents, the initial event), until its context ends.
func (c *memoryCollection) watch(w *memoryWatch, start func(*memoryCollection) []state.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()

	// The queue of a new watch is empty: what it starts with is queued as it is, not merged.
	w.mu.Lock()
	w.queue.events = start(c)
	w.startPump()
	w.mu.Unlock()

	c.watches = append(c.watches, w)

	context.AfterFunc(w.ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()

		c.watches = withoutWatch(c.watches, w)
	})
}

// withoutWatch returns watches without w: in place, or in a list of its own once the list holds a quarter of
// its room or less, so that a collection every cluster of a host watched keeps not the room of them all
// once they are gone.
func withoutWatch(watches []*memoryWatch, w *memoryWatch) []*memoryWatch {
	watches = slices.DeleteFunc(watches, func(other *memoryWatch) bool { return other == w })

	if len(watches) <= cap(watches)/4 {
		return slices.Clone(watches)
	}

	return watches
}

// contents returns the stored resources that w selects, as Created events sorted by ID. c.mu is held.
func (c *memoryCollection) contents(w *memoryWatch) []state.Event {
	events := make([]state.Event, 0, len(c.res))

	for _, res := range c.res {
		if w.matches(res.Metadata()) {
			events = append(events, state.Event{Type: state.Created, Resource: res})
		}
	}

	slices.SortFunc(events, func(a, b state.Event) int {
		return strings.Compare(a.Resource.Metadata().ID(), b.Resource.Metadata().ID())
	})

	return events
}

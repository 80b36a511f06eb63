package k8ssink

import (
	"container/list"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// How Events are correlated (the rules kubelet and kube-controller-manager users know from client-go's
// recorder): an Event that repeats one posted less than eventRepeatWindow ago about the same object (same
// type, reason and message) raises that Event's count instead of adding an Event; each object may have
// eventObjectBurst Events posted at once, and one more every eventObjectRefill, so that an object in trouble
// does not flood the apiserver however often it is decided on. At most eventsRemembered repeats and objects
// are remembered, the least recently seen forgotten first.
const (
	eventRepeatWindow = 10 * time.Minute
	eventObjectBurst  = 25
	eventObjectRefill = 5 * time.Minute
	eventsRemembered  = 4096
)

// eventKey is what makes two Events the same: the object, and what is said of it.
type eventKey struct {
	object                 objectKey
	eventType, reason, msg string
}

// objectKey names the object an Event is about.
type objectKey struct {
	kind, namespace, name, uid string
}

func objectKeyOf(ref *corev1.ObjectReference) objectKey {
	return objectKey{kind: ref.Kind, namespace: ref.Namespace, name: ref.Name, uid: string(ref.UID)}
}

// eventAction is what to do with an Event.
type eventAction int

const (
	// eventDrop: the object used up its Events for now.
	eventDrop eventAction = iota
	// eventCreate: a new Event.
	eventCreate
	// eventRepeat: raise the count of the Event posted before (name, namespace) to count.
	eventRepeat
)

// eventDecision is eventCorrelator's answer.
type eventDecision struct {
	action eventAction
	// name and namespace are the Event to raise, count its new count (eventRepeat).
	name, namespace string
	count           int32
	// first is when the Event was first posted (eventRepeat).
	first time.Time
}

// posted is an Event as posted: where, how often, since when.
type posted struct {
	name, namespace string
	count           int32
	first, last     time.Time
}

// objectTokens is the Events an object may still have posted, as of when they were counted.
type objectTokens struct {
	tokens float64
	at     time.Time
}

// eventCorrelator decides, for each Event, whether it is new, repeats one posted recently, or is one too
// many for its object. It holds no lock: one goroutine uses it (the recorder's).
type eventCorrelator struct {
	repeats *lru[eventKey, posted]
	objects *lru[objectKey, objectTokens]
}

func newEventCorrelator() *eventCorrelator {
	return &eventCorrelator{repeats: newLRU[eventKey, posted](eventsRemembered), objects: newLRU[objectKey, objectTokens](eventsRemembered)}
}

// decide decides about an Event said of an object at now.
func (c *eventCorrelator) decide(key eventKey, now time.Time) eventDecision {
	if !c.take(key.object, now) {
		return eventDecision{action: eventDrop}
	}

	if p, ok := c.repeats.get(key); ok && now.Sub(p.last) < eventRepeatWindow {
		return eventDecision{action: eventRepeat, name: p.name, namespace: p.namespace, count: p.count + 1, first: p.first}
	}

	return eventDecision{action: eventCreate}
}

// take takes one of the object's Events, if it has one left.
func (c *eventCorrelator) take(object objectKey, now time.Time) bool {
	t, ok := c.objects.get(object)
	if !ok {
		t = objectTokens{tokens: eventObjectBurst, at: now}
	}

	if elapsed := now.Sub(t.at); elapsed > 0 {
		t.tokens = min(eventObjectBurst, t.tokens+float64(elapsed)/float64(eventObjectRefill))
		t.at = now
	}

	allowed := t.tokens >= 1
	if allowed {
		t.tokens--
	}

	c.objects.put(object, t)

	return allowed
}

// posted records that an Event was posted (created, or its count raised) as p.
func (c *eventCorrelator) posted(key eventKey, p posted) {
	c.repeats.put(key, p)
}

// forget forgets the Event posted for key: it is gone from the apiserver (Events expire), and the next
// repeat creates it again.
func (c *eventCorrelator) forget(key eventKey) {
	c.repeats.remove(key)
}

// lru is a map of at most size entries that forgets the least recently used first.
type lru[K comparable, V any] struct {
	size    int
	entries map[K]*list.Element
	order   *list.List // of lruEntry, most recent first
}

type lruEntry[K comparable, V any] struct {
	key   K
	value V
}

func newLRU[K comparable, V any](size int) *lru[K, V] {
	return &lru[K, V]{size: size, entries: map[K]*list.Element{}, order: list.New()}
}

func (l *lru[K, V]) get(key K) (V, bool) {
	e, ok := l.entries[key]
	if !ok {
		var zero V

		return zero, false
	}

	l.order.MoveToFront(e)

	return e.Value.(*lruEntry[K, V]).value, true //nolint:forcetypeassert // Only entries go in.
}

func (l *lru[K, V]) put(key K, value V) {
	if e, ok := l.entries[key]; ok {
		e.Value.(*lruEntry[K, V]).value = value //nolint:forcetypeassert // Only entries go in.
		l.order.MoveToFront(e)

		return
	}

	l.entries[key] = l.order.PushFront(&lruEntry[K, V]{key: key, value: value})

	if l.order.Len() > l.size {
		oldest := l.order.Back()
		l.order.Remove(oldest)
		delete(l.entries, oldest.Value.(*lruEntry[K, V]).key) //nolint:forcetypeassert // Only entries go in.
	}
}

func (l *lru[K, V]) remove(key K) {
	if e, ok := l.entries[key]; ok {
		l.order.Remove(e)
		delete(l.entries, key)
	}
}

package talos

import "sync/atomic"

// nodeCondition is what a machine's session knows of its Node: whether it is NotReady (its machine is
// probed) and whether it is uninitialized (its machine's PlatformMetadata is read again while a providerID
// is still to come). The controller's passes set it; a change wakes the session, so that thousands of idle
// sessions need no ticker each.
type nodeCondition struct {
	changed       chan struct{}
	notReady      atomic.Bool
	uninitialized atomic.Bool
}

func newNodeCondition(notReady, uninitialized bool) *nodeCondition {
	c := &nodeCondition{changed: make(chan struct{}, 1)}
	c.notReady.Store(notReady)
	c.uninitialized.Store(uninitialized)

	return c
}

// set records the Node's condition; a change signals the session (at most one signal waits).
func (c *nodeCondition) set(notReady, uninitialized bool) {
	readyChanged := c.notReady.Swap(notReady) != notReady
	initChanged := c.uninitialized.Swap(uninitialized) != uninitialized

	if readyChanged || initChanged {
		c.signal()
	}
}

// signal wakes the session to look at the condition.
func (c *nodeCondition) signal() {
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

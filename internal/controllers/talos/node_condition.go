package talos

import "sync/atomic"

// nodeCondition is what a machine's session knows of its Node: whether it is NotReady (its machine is
// probed) and whether it is uninitialized (its machine's PlatformMetadata is read again while a providerID
// is still to come). The controller's passes set it; a change wakes the session, so that thousands of idle
// sessions need no ticker each.
type nodeCondition struct {
	notReady      atomic.Bool
	uninitialized atomic.Bool
	// changed is set by a change the session has not looked at yet.
	changed atomic.Bool
	// wake wakes the session following the condition; nil while none does.
	wake atomic.Pointer[func()]
}

func newNodeCondition(notReady, uninitialized bool) *nodeCondition {
	c := &nodeCondition{}
	c.notReady.Store(notReady)
	c.uninitialized.Store(uninitialized)

	return c
}

// set records the Node's condition; a change wakes the session.
func (c *nodeCondition) set(notReady, uninitialized bool) {
	readyChanged := c.notReady.Swap(notReady) != notReady
	initChanged := c.uninitialized.Swap(uninitialized) != uninitialized

	if readyChanged || initChanged {
		c.changed.Store(true)

		if wake := c.wake.Load(); wake != nil {
			(*wake)()
		}
	}
}

// follow makes changes call wake (nil: nothing); a change the session has not looked at yet stays.
func (c *nodeCondition) follow(wake func()) {
	if wake == nil {
		c.wake.Store(nil)

		return
	}

	c.wake.Store(&wake)
}

// takeChange reports whether the condition changed since the session last looked, and forgets it.
func (c *nodeCondition) takeChange() bool {
	return c.changed.Swap(false)
}

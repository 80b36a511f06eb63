package talos

import (
	"fmt"
	"runtime/debug"
)

// offStack runs work on a goroutine of its own, waits for it, and returns its error: a session's
// goroutine, which lives as long as its machine's Node and waits on its watch stream nearly all that time,
// hands it the deep work (the Talos calls of connecting, decoding, handing facts on), whose stack then dies
// with the goroutine that ran it.
//
// A goroutine's stack grows to the deepest call it ever made, and a GC only halves it when less than a
// quarter of it is in use: deep work run on the session's goroutine would stay in its stack, times
// thousands of machines, and would also raise the size every new goroutine starts at (the average of the
// stacks in use). Starting a goroutine costs less than the Talos call, or the fact, it runs for.
//
// A panic of work is raised again on the caller's goroutine, with the stack it was raised on, where the
// session's task runner reports it.
func offStack(work func() error) error {
	var (
		err      error
		panicked any
		done     = make(chan struct{})
	)

	go func() {
		defer close(done)

		defer func() {
			if p := recover(); p != nil {
				panicked = fmt.Sprintf("%v\n\n%s", p, debug.Stack())
			}
		}()

		err = work()
	}()

	<-done

	if panicked != nil {
		panic(panicked)
	}

	return err
}

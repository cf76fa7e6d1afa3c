// Package osthread runs functions that move their OS thread into other
// namespaces on threads of their own, which end with them.
package osthread

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// Run calls fn on a locked OS thread that ends when fn returns, so that
// whatever namespaces fn enters never reach another goroutine. The thread
// is never the process's main thread: Go parks an ended locked main
// thread instead of ending it, which would keep fn's namespaces (and
// their mounts) alive, and /proc/self, which names that thread, would
// show them to the whole process.
func Run(fn func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- runLocked(fn) }()
	return <-errc
}

// runLocked locks the calling goroutine to its thread for good and calls
// fn there, unless that is the main thread: then it holds the main thread
// while Run finds fn another, and hands it back unchanged.
func runLocked(fn func() error) error {
	runtime.LockOSThread()
	if unix.Gettid() == unix.Getpid() {
		defer runtime.UnlockOSThread()
		return Run(fn)
	}
	return fn()
}

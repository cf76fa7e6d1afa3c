package cache

import "sync"

// changes wakes waiters on every change of a cache. A waiter takes the
// channel before it looks, so no change can fall between the two.
type changes struct {
	mu sync.Mutex
	ch chan struct{} // closed and replaced on every change
}

func newChanges() *changes { return &changes{ch: make(chan struct{})} }

// next returns the channel closed on the next change.
func (c *changes) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ch
}

func (c *changes) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.ch)
	c.ch = make(chan struct{})
}

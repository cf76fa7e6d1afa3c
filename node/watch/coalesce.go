package watch

import (
	"context"
	"io"
	"sync"
)

// coalescer holds the latest value of each key until forward hands it on.
// Its put never blocks, which keeps a kernel socket's reader ahead of a
// slow consumer; a key put again while pending keeps its place in line
// and takes the new value.
type coalescer[K comparable, V any] struct {
	mu      sync.Mutex
	pending map[K]V
	order   []K // pending keys, oldest first
	ready   chan struct{}
}

func newCoalescer[K comparable, V any]() *coalescer[K, V] {
	return &coalescer[K, V]{pending: map[K]V{}, ready: make(chan struct{}, 1)}
}

func (c *coalescer[K, V]) put(k K, v V) {
	c.mu.Lock()
	if _, ok := c.pending[k]; !ok {
		c.order = append(c.order, k)
	}
	c.pending[k] = v
	c.mu.Unlock()
	select {
	case c.ready <- struct{}{}:
	default:
	}
}

// take removes and returns the value of the oldest pending key.
func (c *coalescer[K, V]) take() (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.order) == 0 {
		var zero V
		return zero, false
	}
	k := c.order[0]
	if c.order = c.order[1:]; len(c.order) == 0 {
		c.order = nil // let a drained burst's backing array go
	}
	v := c.pending[k]
	delete(c.pending, k)
	return v, true
}

// forward sends pending values to out until ctx is done.
func (c *coalescer[K, V]) forward(ctx context.Context, out chan<- V) {
	for {
		v, ok := c.take()
		if !ok {
			select {
			case <-c.ready:
				continue
			case <-ctx.Done():
				return
			}
		}
		select {
		case out <- v:
		case <-ctx.Done():
			return
		}
	}
}

// pump runs read on a goroutine of its own, feeding a coalescer whose
// values go to out, until ctx is done or read fails. Closing src must make
// read return. pump returns nil when ctx ended it and read's error
// otherwise; either way src is closed and read has returned.
func pump[K comparable, V any](ctx context.Context, src io.Closer, out chan<- V, read func(put func(K, V)) error) error {
	c := newCoalescer[K, V]()
	fwd, cancel := context.WithCancel(ctx)
	defer cancel()
	readErr := make(chan error, 1)
	go func() {
		err := read(c.put)
		cancel()
		readErr <- err
	}()
	c.forward(fwd, out)
	_ = src.Close() // an error closing a source we are done with changes nothing
	err := <-readErr
	if ctx.Err() != nil {
		return nil
	}
	return err
}

package watch

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestCoalescer(t *testing.T) {
	type put struct {
		key   string
		value int
	}
	tests := []struct {
		name string
		puts []put
		want []int
	}{
		{"nothing", nil, nil},
		{"one per key, in order", []put{{"a", 1}, {"b", 2}, {"c", 3}}, []int{1, 2, 3}},
		{"latest value wins, first place kept", []put{{"a", 1}, {"b", 2}, {"a", 3}}, []int{3, 2}},
		{"a burst of one key", []put{{"a", 1}, {"a", 2}, {"a", 3}, {"a", 4}}, []int{4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCoalescer[string, int]()
			for _, p := range tt.puts {
				c.put(p.key, p.value)
			}
			var got []int
			for v, ok := c.take(); ok; v, ok = c.take() {
				got = append(got, v)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("took %v, want %v", got, tt.want)
			}
		})
	}
}

// TestCoalescerForward checks that a value put while forward waits for a
// consumer, or for values, still arrives.
func TestCoalescerForward(t *testing.T) {
	c := newCoalescer[string, int]()
	out := make(chan int)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.forward(ctx, out)
		close(done)
	}()
	c.put("a", 1)
	if v := receive(t, out); v != 1 {
		t.Errorf("got %d, want 1", v)
	}
	c.put("a", 2)
	c.put("b", 3)
	if v := receive(t, out); v != 2 {
		t.Errorf("got %d, want 2", v)
	}
	if v := receive(t, out); v != 3 {
		t.Errorf("got %d, want 3", v)
	}
	cancel()
	receive(t, done)
}

// closer records whether pump closed its source and unblocks the reader.
type closer struct{ closed chan struct{} }

func (c *closer) Close() error {
	select {
	case <-c.closed:
	default:
		close(c.closed)
	}
	return nil
}

func TestPump(t *testing.T) {
	readErr := errors.New("socket broke")
	tests := []struct {
		name string
		// read runs as pump's reader; src is closed to stop it.
		read   func(src *closer, put func(string, int)) error
		cancel bool
		want   error
	}{{
		name: "stopped by its context",
		read: func(src *closer, put func(string, int)) error {
			<-src.closed
			return errors.New("read on closed socket")
		},
		cancel: true,
	}, {
		name: "stopped by the reader's error",
		read: func(src *closer, put func(string, int)) error { return readErr },
		want: readErr,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := &closer{closed: make(chan struct{})}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			err := pump(ctx, src, make(chan int), func(put func(string, int)) error { return tt.read(src, put) })
			if !errors.Is(err, tt.want) {
				t.Errorf("pump = %v, want %v", err, tt.want)
			}
			select {
			case <-src.closed:
			default:
				t.Error("source not closed")
			}
		})
	}
}

package chain

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// ErrPluginTimeout marks a plugin execution killed at the plugin timeout.
var ErrPluginTimeout = errors.New("no answer within the plugin timeout")

// WithPluginTimeout returns a Chain whose every plugin execution is
// killed after d, with an error saying so: a plugin stuck on a dead
// device or API would otherwise hold the sandbox until the runtime's own
// deadline, minutes later, on every retry. d <= 0 returns c unchanged.
func (c *Chain) WithPluginTimeout(d time.Duration) *Chain {
	if d <= 0 {
		return c
	}
	t := *c
	t.exec = timeoutExec{Exec: c.exec, timeout: d}
	return &t
}

// timeoutExec bounds each plugin execution; finding and decoding stay
// the wrapped Exec's.
type timeoutExec struct {
	Exec
	timeout time.Duration
}

func (e timeoutExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	out, err := e.Exec.ExecPlugin(ctx, path, stdin, environ)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return out, fmt.Errorf("%w of %s: %w", ErrPluginTimeout, e.timeout, err)
	}
	return out, err
}

// Package logtest keeps what a logger writes from other goroutines, for
// tests that wait on what a component logged.
package logtest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is an io.Writer safe for concurrent writes and reads.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Buffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String is everything written so far.
func (l *Buffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Contains reports whether s was written.
func (l *Buffer) Contains(s string) bool { return strings.Contains(l.String(), s) }

// Lines are the lines written so far, without the last newline.
func (l *Buffer) Lines() []string {
	return strings.Split(strings.TrimSpace(l.String()), "\n")
}

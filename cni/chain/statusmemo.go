package chain

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hwnet-io/hwnet/cni/netconf"
)

// StatusMemo remembers the STATUS runs that passed, so that a list asked
// again soon answers without its plugins' processes: containerd 2.x asks
// STATUS for kubelet every 5 s, and each run is a process per plugin (and
// one per IPAM plugin it calls). A pass answers again while its plugins
// are the same files given the same input, for at most the memo's reuse:
// a plugin whose STATUS reads the world beyond them (a daemon it asks, a
// file it checks) and starts to fail is reported up to that long late. A
// failure is never remembered: the next ask runs the plugins again.
type StatusMemo struct {
	reuse time.Duration
	now   func() time.Time
	mu    sync.Mutex
	// passed is when each run that passed started, by the run's key
	// (statusKey); a pass older than reuse is dropped at the next pass.
	passed map[string]time.Time
}

// NewStatusMemo returns a memo that reuses a pass for reuse (0: never),
// telling time by now (nil: time.Now).
func NewStatusMemo(reuse time.Duration, now func() time.Time) *StatusMemo {
	if now == nil {
		now = time.Now
	}
	return &StatusMemo{reuse: reuse, now: now, passed: map[string]time.Time{}}
}

// Status answers as c.Status(ctx, list) does, from a pass of the same run
// within the memo's reuse when there is one.
func (m *StatusMemo) Status(ctx context.Context, c *Chain, list *netconf.Delegate) error {
	if m.reuse <= 0 || !supportsLifecycle(list) {
		return c.Status(ctx, list)
	}
	key, err := c.statusKey(list)
	if err != nil {
		// A plugin missing or unreadable: Status says which.
		return c.Status(ctx, list)
	}
	start := m.now()
	if m.passedSince(key, start.Add(-m.reuse)) {
		return nil
	}
	if err := c.Status(ctx, list); err != nil {
		m.forget(key)
		return err
	}
	m.remember(key, start)
	return nil
}

func (m *StatusMemo) passedSince(key string, since time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.passed[key]
	return ok && at.After(since)
}

func (m *StatusMemo) forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.passed, key)
}

// remember keeps a pass and drops the ones too old to answer, which keeps
// the memo to the runs of the last reuse.
func (m *StatusMemo) remember(key string, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k, t := range m.passed {
		if !t.After(at.Add(-m.reuse)) {
			delete(m.passed, k)
		}
	}
	m.passed[key] = at
}

// statusKey names what a STATUS run of list depends on that hwnet can
// see: each plugin's file (device, inode, size, change time) and exact
// input, and the change time of every directory searched for plugins, so
// that a plugin installed, removed or replaced there, an IPAM plugin too,
// makes a new run. A plugin rewritten in place other than a list's own
// is not seen.
func (c *Chain) statusKey(list *netconf.Delegate) (string, error) {
	var key []byte
	for _, dir := range c.path {
		id, err := fileID(dir)
		if errors.Is(err, fs.ErrNotExist) {
			id = "absent"
		} else if err != nil {
			return "", err
		}
		key = fmt.Appendf(key, "%s %s\n", dir, id)
	}
	for _, p := range list.Plugins {
		path, stdin, err := c.prepare(list, p, nil, Runtime{})
		if err != nil {
			return "", err
		}
		id, err := fileID(path)
		if err != nil {
			return "", err
		}
		key = fmt.Appendf(key, "%s %s %s\n", path, id, stdin)
	}
	return string(key), nil
}

// fileID is what changes when a file is replaced or written.
func fileID(path string) (string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "", fmt.Errorf("%s: no file identity", path)
	}
	return fmt.Sprintf("%d:%d:%d:%d.%d", st.Dev, st.Ino, st.Size, st.Ctim.Sec, st.Ctim.Nsec), nil
}

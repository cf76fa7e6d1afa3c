package ledger

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/internal/wakeup"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/watch"
)

// Collector removes the device-info files of devices nothing holds any
// more: a device plugin writes one on Allocate, but kubelet never says
// when the pod that got the device is gone, so the ledger is asked. It only
// touches the files of resources Add named.
type Collector struct {
	// Dir is the device plugins' device-info directory.
	Dir    string
	Logger *slog.Logger
	// Also, when set, collects more at each round of Run whose ledger
	// is complete: what was written before since and nothing l names
	// holds may go; it says whether it left something for being written
	// since. Collect alone, as at shutdown, does not call it.
	Also func(l *Ledger, since time.Time) (young bool)
	// AskAgain, when set, is called after a round of Run that left a
	// file for being younger than the grace before its ledger was read:
	// an idle node's ledger asks kubelet only every few minutes, and only
	// a read after the file's time plus the grace lets it go.
	AskAgain func()
	// Watch, when set, watches the directories a round looks in (the
	// device-info directory, the CDI specs Also judges), sending a change
	// to changed, and returns a channel closed when the watch ends. Run
	// looks again after each change, and not otherwise while rounds
	// settle: without a watch, or while it cannot be made, every interval.
	Watch func(ctx context.Context, changed chan<- watch.SocketEvent) (ended <-chan struct{}, err error)

	mu        sync.Mutex
	resources map[string]bool
	// wake is held while Run has a round scheduled, which sees every
	// change woken for before it.
	wake *wakeup.Signal
}

// Wake has Run collect: what a round judges by may have changed (the
// ledger's holds, the pools served). It never blocks.
func (c *Collector) Wake() { c.wakes().Send() }

// wakes is Wake's signal.
func (c *Collector) wakes() *wakeup.Signal {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.wake == nil {
		c.wake = wakeup.New()
	}
	return c.wake
}

// Add makes the collector look after a resource's files; the set only
// grows, so files of a pool removed from the configuration, or switched to
// DRA, are collected too.
func (c *Collector) Add(resource string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resources == nil {
		c.resources = map[string]bool{}
	}
	c.resources[resource] = true
	// Not Wake, which makes the signal: only a Run already running is
	// woken, since Run collects when it starts.
	if c.wake != nil {
		c.wake.Send()
	}
}

// names are the collector's resources, in no order.
func (c *Collector) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Collect(maps.Keys(c.resources))
}

// count is how many resources the collector looks after.
func (c *Collector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.resources)
}

// Collect removes the files of devices l says nothing holds that were
// written at least grace before l was read: kubelet reports an allocation
// only after Allocate, which writes the file, returned. A ledger with a
// source unread removes nothing: the device may be held.
func (c *Collector) Collect(l *Ledger, grace time.Duration) error {
	_, err := c.collect(l, grace)
	return err
}

// collect is Collect, and says whether it left a file of a device
// nothing holds because it is younger than the grace.
func (c *Collector) collect(l *Ledger, grace time.Duration) (young bool, err error) {
	if !l.Complete() {
		return false, nil
	}
	files, err := c.files()
	if err != nil {
		return false, err
	}
	for _, f := range files {
		if len(l.Holders(f.DeviceID)) > 0 {
			continue
		}
		if !writtenBefore(f.Path, l.ReadAt.Add(-grace)) {
			young = true
			continue
		}
		if err := devinfo.RemoveFile(f.Path); err != nil {
			return young, err
		}
		c.Logger.Info("device-info file removed: nothing holds the device", "file", f.Path, "device", f.DeviceID)
	}
	return young, nil
}

// files lists the device-info files of the collector's resources.
func (c *Collector) files() ([]devinfo.File, error) {
	files, err := devinfo.List(c.Dir)
	if err != nil {
		return nil, err
	}
	names := c.names()
	return slices.DeleteFunc(files, func(f devinfo.File) bool {
		return !slices.ContainsFunc(names, f.Belongs)
	}), nil
}

func writtenBefore(path string, t time.Time) bool {
	st, err := os.Stat(path)
	return err == nil && !st.ModTime().After(t)
}

// settled is what a pass of Run that left nothing to look at again saw:
// the ledger, the directory before the pass and the resources.
type settled struct {
	ledger    *Ledger
	dir       dirStamp
	resources int
}

// same reports whether a pass now would see what s saw: the same holds,
// no file added or removed since, no resource added. It then removes
// nothing, and is skipped: at 1,500 held devices a pass stats every file
// (2-3 ms of an idle agent's every 30 s).
func (s *settled) same(l *Ledger, dir dirStamp, resources int) bool {
	return s != nil && dir.same(s.dir) && resources == s.resources && l.Equal(s.ledger)
}

// dirStamp is what a stat of a directory said: its time, or that it does
// not exist, which stays so until a file is written (before any Allocate,
// and on a node whose pods take no device through a device plugin);
// neither when it could not be stat'ed.
type dirStamp struct {
	mod    time.Time
	absent bool
}

func stampDir(dir string) dirStamp {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return dirStamp{absent: true}
	case err != nil:
		return dirStamp{}
	}
	return dirStamp{mod: fi.ModTime()}
}

// same reports whether d says what o did, and says something.
func (d dirStamp) same(o dirStamp) bool {
	return d.absent && o.absent || !d.mod.IsZero() && d.mod.Equal(o.mod)
}

// Run collects until ctx ends: at once, then after each change (Wake,
// Add, a change Watch reports), at most once an interval, and every
// interval while a round left something to look at again (a file younger
// than the grace, a source unknown) or no watch runs. A round that would
// see what the last one saw is skipped. An idle node's agent is not woken
// by it: every round there saw the last one's holds and files.
func (c *Collector) Run(ctx context.Context, interval, grace time.Duration, latest func() *Ledger) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	wake := c.wakes()
	changed := make(chan watch.SocketEvent, 1)
	var watched <-chan struct{}
	var last *settled
	var lastRound time.Time
	for {
		owed := false
		select {
		case <-ctx.Done():
			return
		case <-wake.C():
			owed = true
		case <-changed:
			owed = true
		case <-watched:
			watched, owed = nil, true
		case <-timer.C:
			wake.Release()
			if watched == nil {
				watched = c.watch(ctx, changed)
			}
			last, lastRound = c.round(latest(), grace, last), time.Now()
			owed = last == nil || watched == nil
		}
		if owed {
			// A wake meanwhile could bring the round no sooner.
			timer.Reset(time.Until(lastRound.Add(interval)))
			wake.Hold()
		}
	}
}

// watch starts Watch; nil when there is none or it cannot be made.
func (c *Collector) watch(ctx context.Context, changed chan<- watch.SocketEvent) <-chan struct{} {
	if c.Watch == nil {
		return nil
	}
	ended, err := c.Watch(ctx, changed)
	if err != nil {
		c.Logger.Warn("device-info and CDI spec directories not watched; collected every interval", "err", err)
		return nil
	}
	return ended
}

// round is one round of Run after last, with ledger l: Also, then the
// device-info files unless the last pass saw what this one would, then
// AskAgain when either left something for being young. It returns what
// the pass saw (pass), nil when Also left something: Run looks again.
func (c *Collector) round(l *Ledger, grace time.Duration, last *settled) *settled {
	young := c.Also != nil && l.Complete() && c.Also(l, l.ReadAt.Add(-grace))
	next, left := c.pass(l, grace, last)
	if (young || left) && c.AskAgain != nil {
		c.AskAgain()
	}
	if young {
		return nil
	}
	return next
}

// pass is one round of Run after last: what it saw, nil when a pass
// must look again, and whether it left a file for being young.
func (c *Collector) pass(l *Ledger, grace time.Duration, last *settled) (*settled, bool) {
	// The directory's time is taken first: a file written during the
	// pass makes the next one look.
	dir := stampDir(c.Dir)
	resources := c.count()
	if last.same(l, dir, resources) {
		return last, false
	}
	young, err := c.collect(l, grace)
	if err != nil {
		c.Logger.Warn("device-info files not collected this round", "err", err)
	}
	// A directory changed a moment ago may change again within its
	// time's granularity (a clock tick) and keep the time: it is looked
	// at again.
	if err != nil || young || !l.Complete() || time.Since(dir.mod) < dirTimeGrain {
		return nil, young
	}
	return &settled{ledger: l, dir: dir, resources: resources}, false
}

// dirTimeGrain is more than a file system's time granularity: the kernel
// stamps files with a clock that moves once a tick.
const dirTimeGrain = time.Second

// dirTime is the directory's modification time, zero when it cannot be
// stat'ed.
func dirTime(dir string) time.Time { return stampDir(dir).mod }

package ledger

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/node/devinfo"
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
	// holds may go. Collect alone, as at shutdown, does not call it.
	Also func(l *Ledger, since time.Time)

	mu        sync.Mutex
	resources map[string]bool
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
}

func (c *Collector) names() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.resources))
}

// Collect removes the files of devices l says nothing holds that were
// written at least grace before l was read: kubelet reports an allocation
// only after Allocate, which writes the file, returned. A ledger with a
// source unread removes nothing: the device may be held.
func (c *Collector) Collect(l *Ledger, grace time.Duration) error {
	if !l.Complete() {
		return nil
	}
	files, err := c.files()
	if err != nil {
		return err
	}
	for _, f := range files {
		if len(l.Holders(f.DeviceID)) > 0 || !writtenBefore(f.Path, l.ReadAt.Add(-grace)) {
			continue
		}
		if err := devinfo.RemoveFile(f.Path); err != nil {
			return err
		}
		c.Logger.Info("device-info file removed: nothing holds the device", "file", f.Path, "device", f.DeviceID)
	}
	return nil
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

// Run collects every interval, with the ledger latest gives, until ctx
// ends.
func (c *Collector) Run(ctx context.Context, interval, grace time.Duration, latest func() *Ledger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l := latest()
			if c.Also != nil && l.Complete() {
				c.Also(l, l.ReadAt.Add(-grace))
			}
			if err := c.Collect(l, grace); err != nil {
				c.Logger.Warn("device-info files not collected this round", "err", err)
			}
		}
	}
}

package devinfo

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/podresources"
)

// podResourcesTimeout bounds one collection round's talk with kubelet.
const podResourcesTimeout = 10 * time.Second

// Collector removes the device-info files of devices no pod holds any
// more: a device plugin writes one on Allocate, but kubelet never says
// when the pod that got the device is gone, so kubelet's PodResources
// API is asked instead. It only touches the files of resources Add named.
type Collector struct {
	// Dir is the device plugins' device-info directory.
	Dir string
	// PodResourcesSocket is kubelet's PodResources API.
	PodResourcesSocket string
	Metrics            *metrics.Metrics
	Logger             *slog.Logger

	mu        sync.Mutex
	resources map[string]bool
}

// Add makes the collector look after a resource's files; the set only
// grows, so files of a pool removed from the configuration are collected
// too.
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

// Run removes, every interval, the files whose device no pod holds and
// that are older than grace, until ctx ends.
func (c *Collector) Run(ctx context.Context, interval, grace time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.RemoveUnallocated(ctx, grace); err != nil {
				c.Logger.Warn("device-info files not collected this round", "err", err)
			}
		}
	}
}

// RemoveUnallocated removes the files that PodResources says no container
// holds and that are older than grace: kubelet records an allocation only
// after Allocate has returned.
func (c *Collector) RemoveUnallocated(ctx context.Context, grace time.Duration) error {
	byResource, err := c.files()
	if err != nil || len(byResource) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	client, err := podresources.Dial(ctx, c.PodResourcesSocket)
	if err != nil {
		return fmt.Errorf("kubelet PodResources: %w", err)
	}
	defer client.Close()
	for resource, files := range byResource {
		held, err := client.Allocated(ctx, resource)
		c.Metrics.PodResourcesRequest(err)
		if err != nil {
			return fmt.Errorf("kubelet PodResources: %w", err)
		}
		if err := c.remove(resource, files, held, grace); err != nil {
			return err
		}
	}
	return nil
}

// remove removes a resource's files whose device is not held and that are
// older than grace.
func (c *Collector) remove(resource string, files []File, held map[string]podresources.PodRef, grace time.Duration) error {
	for _, f := range files {
		if _, ok := held[f.DeviceID]; ok || !olderThan(f.Path, grace) {
			continue
		}
		if err := RemoveFile(f.Path); err != nil {
			return err
		}
		c.Logger.Info("device-info file removed: the device is no longer allocated", "resource", resource, "device", f.DeviceID)
	}
	return nil
}

// files lists the device-info files of the collector's resources.
func (c *Collector) files() (map[string][]File, error) {
	files, err := List(c.Dir)
	if err != nil {
		return nil, err
	}
	byResource := map[string][]File{}
	for _, name := range c.names() {
		for _, f := range files {
			if f.Belongs(name) {
				byResource[name] = append(byResource[name], f)
			}
		}
	}
	return byResource, nil
}

func olderThan(path string, age time.Duration) bool {
	st, err := os.Stat(path)
	return err == nil && time.Since(st.ModTime()) >= age
}

// Held is the devices whose device-info files are in dir: the devices
// containers hold, as far as the device plugins know.
func Held(dir string) (map[string]bool, error) {
	files, err := List(dir)
	if err != nil {
		return nil, err
	}
	held := make(map[string]bool, len(files))
	for _, f := range files {
		held[f.DeviceID] = true
	}
	return held, nil
}

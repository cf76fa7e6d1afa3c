package agent

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/podresources"
)

// podResourcesTimeout bounds one collection round's talk with kubelet.
const podResourcesTimeout = 10 * time.Second

// collectDevinfo removes, every GCInterval, the device-info files of the
// agent's resources whose device no pod holds any more.
func (a *Agent) collectDevinfo(ctx context.Context) {
	t := time.NewTicker(a.opts.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := a.removeUnallocated(ctx, a.opts.DevinfoGrace); err != nil {
				a.log.Warn("device-info files not collected this round", "err", err)
			}
		}
	}
}

// removeUnallocated removes the device-info files of the agent's resources
// that PodResources says no container holds and that are older than grace:
// kubelet records an allocation only after Allocate has returned.
func (a *Agent) removeUnallocated(ctx context.Context, grace time.Duration) error {
	byResource, err := a.devinfoFiles()
	if err != nil || len(byResource) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	client, err := podresources.Dial(ctx, a.opts.PodResourcesSocket)
	if err != nil {
		return fmt.Errorf("kubelet PodResources: %w", err)
	}
	defer client.Close()
	for resource, files := range byResource {
		held, err := client.Allocated(ctx, resource)
		a.metrics.PodResourcesRequest(err)
		if err != nil {
			return fmt.Errorf("kubelet PodResources: %w", err)
		}
		for _, f := range files {
			if _, ok := held[f.DeviceID]; ok || !olderThan(f.Path, grace) {
				continue
			}
			if err := devinfo.RemoveFile(f.Path); err != nil {
				return err
			}
			a.log.Info("device-info file removed: the device is no longer allocated", "resource", resource, "device", f.DeviceID)
		}
	}
	return nil
}

// devinfoFiles lists the device-info files of the agent's resources.
func (a *Agent) devinfoFiles() (map[string][]devinfo.File, error) {
	files, err := devinfo.List(a.opts.DevinfoDir)
	if err != nil {
		return nil, err
	}
	byResource := map[string][]devinfo.File{}
	for _, name := range a.resources.list() {
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

package daemon

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/hwnet-io/hwnet/cni/delegate"
)

// Defaults of the CNI side's own garbage collection of attachments.
const (
	DefaultCRISocket         = "/run/containerd/containerd.sock"
	DefaultReconcileInterval = time.Minute
	// reconcileGrace spares a record whose ADD finished this recently: the
	// runtime lists a sandbox only once its network is set up.
	reconcileGrace = time.Minute
)

// reconcileLoop tears down, every interval, the attachments of sandboxes the
// runtime no longer has (delegate.Reconcile), so no failed or interrupted
// sandbox leaks a record, device-info files, IP leases or a VF, whatever
// the runtime does.
func reconcileLoop(ctx context.Context, d *delegate.Delegator, o Options, log *slog.Logger) {
	if o.CRISocket == "" || o.ReconcileInterval <= 0 {
		return
	}
	t := time.NewTicker(o.ReconcileInterval)
	defer t.Stop()
	for {
		if err := reconcileOnce(ctx, d, o, log); err != nil {
			log.Warn("reconcile of attachments skipped", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func reconcileOnce(ctx context.Context, d *delegate.Delegator, o Options, log *slog.Logger) error {
	conf, err := ownPluginConf(o.ConfPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil // not written yet: no attachment can exist
	}
	if err != nil {
		return err
	}
	live, err := liveSandboxes(ctx, o.CRISocket)
	if err != nil {
		return err
	}
	collected, err := d.Reconcile(ctx, conf, o.BinDir, live, reconcileGrace)
	if len(collected) > 0 {
		log.Info("tore down the attachments of sandboxes the runtime no longer has", "containers", collected)
	}
	return err
}

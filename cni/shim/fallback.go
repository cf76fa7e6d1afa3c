package shim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/netconf"
	"github.com/hwnet-io/hwnet/cni/pluginconf"
	"github.com/hwnet-io/hwnet/cni/wire"
)

// deleteFromRecord is DEL without the agent: it runs every delegate's DEL
// from the record hwnet kept at ADD time, and leaves the reset of each VF
// it set settings on pending on disk (it cannot set VF settings itself):
// the agent performs it when it starts, before it serves, and the device
// ledger keeps the VF out of every pool until it is done. No record means nothing hwnet
// attached is left, and DEL must succeed again (CNI spec, "Network
// Configuration List Error Handling"), once the default network the
// runtime may have attached the container to itself is deleted. A failed
// delegate does not stop the others; the record stays so a later DEL
// retries (NPWG 7.2). No record directory, as an uninstall leaves, is no
// record, and is not made again.
func deleteFromRecord(ctx context.Context, cfg *pluginconf.Conf, req *wire.Request, logger *slog.Logger) error {
	store := attachments.NewStore(cfg.CacheDir)
	unlock, err := store.LockIfExists(ctx, req.ContainerID)
	switch {
	case errors.Is(err, os.ErrNotExist): // no store, no record
	case err != nil:
		return err
	default:
		defer unlock()
	}
	rec, err := store.Load(req.ContainerID)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	ch := chain.New(nil, filepath.SplitList(req.Path), os.Environ())
	warn := func(err error) {
		logger.Warn("teardown passed over what is gone or not installed", "containerID", req.ContainerID, "err", err)
	}
	if rec == nil {
		return deleteRuntimeAttached(ctx, cfg, ch, req, logger, warn)
	}
	if err := attachments.DeleteAll(ctx, ch, rec, warn); err != nil {
		return fmt.Errorf("DEL of container %s without hwnet-agent failed, record kept for a retry: %w", req.ContainerID, err)
	}
	if err := leaveResets(store, rec, logger); err != nil {
		return fmt.Errorf("DEL of container %s without hwnet-agent: record kept for a retry: %w", req.ContainerID, err)
	}
	if err := store.Remove(req.ContainerID); err != nil {
		return err
	}
	logger.Info("deleted attachments from the record", "containerID", req.ContainerID, "attachments", len(rec.Attachments))
	return nil
}

// deleteRuntimeAttached is deleteFromRecord without a record: the default
// network's DEL, if it holds the container though hwnet has no record of
// it (attachments.RuntimeCache).
func deleteRuntimeAttached(ctx context.Context, cfg *pluginconf.Conf, ch *chain.Chain, req *wire.Request, logger *slog.Logger, warn func(error)) error {
	if cfg.DefaultNetwork == "" {
		logger.Info("no attachment record, nothing to delete", "containerID", req.ContainerID)
		return nil
	}
	def, err := netconf.LoadFile(cfg.DefaultNetwork)
	if err != nil {
		logger.Warn("no record and no default network to delete the container from", "containerID", req.ContainerID, "err", err)
		return nil
	}
	rt := chain.Runtime{ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName}
	rc := attachments.RuntimeCache{Dir: cfg.RuntimeCacheDir, Own: cfg.Name, Default: def}
	deleted, err := rc.Delete(ctx, ch, rt, warn)
	if err != nil {
		return fmt.Errorf("DEL of container %s without hwnet-agent failed: %w", req.ContainerID, err)
	}
	logger.Info("no attachment record", "containerID", req.ContainerID, "runtimeAttachedDefaultDeleted", deleted)
	return nil
}

// leaveResets leaves pending the reset of every VF rec's attachments set
// settings on.
func leaveResets(store *attachments.Store, rec *attachment.Record, logger *slog.Logger) error {
	for _, a := range rec.Attachments {
		if a.VF == nil {
			continue
		}
		reason := fmt.Sprintf("container %s of pod %s/%s deleted by the shim while hwnet-agent was away", rec.ContainerID, rec.PodNamespace, rec.PodName)
		if err := store.LeaveReset(*a.VF, reason); err != nil {
			return err
		}
		logger.Info("VF settings reset left pending for the agent", "containerID", rec.ContainerID, "device", a.VF.PCIAddress)
	}
	return nil
}

package shim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/chain"
	"github.com/hwnet-io/hwnet/cni/wire"
)

// deleteFromRecord is DEL without the agent: it runs every delegate's DEL
// from the record hwnet kept at ADD time. No record means nothing hwnet
// attached is left, and DEL must succeed again (CNI spec, "Network
// Configuration List Error Handling"). A failed delegate does not stop the
// others; the record stays so a later DEL retries (NPWG 7.2).
func deleteFromRecord(ctx context.Context, cacheDir string, req *wire.Request, logger *slog.Logger) error {
	store := attachments.NewStore(cacheDir)
	unlock, err := store.Lock(ctx, req.ContainerID)
	if err != nil {
		return err
	}
	defer unlock()
	rec, err := store.Load(req.ContainerID)
	if errors.Is(err, os.ErrNotExist) {
		logger.Info("no attachment record, nothing to delete", "containerID", req.ContainerID)
		return nil
	}
	if err != nil {
		return err
	}
	ch := chain.New(nil, filepath.SplitList(req.Path), os.Environ())
	warn := func(err error) {
		logger.Warn("teardown passed over what is gone or not installed", "containerID", req.ContainerID, "err", err)
	}
	if err := attachments.DeleteAll(ctx, ch, rec, warn); err != nil {
		return fmt.Errorf("DEL of container %s without hwnet-agent failed, record kept for a retry: %w", req.ContainerID, err)
	}
	if err := store.Remove(req.ContainerID); err != nil {
		return err
	}
	logger.Info("deleted attachments from the record", "containerID", req.ContainerID, "attachments", len(rec.Attachments))
	return nil
}

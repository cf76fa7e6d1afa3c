package dra

import (
	"log/slog"
	"os"
	"strings"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
)

// readBootID is the node's boot ID from path, or "" when it cannot be
// read, which is logged.
func readBootID(path string, log *slog.Logger) string {
	data, err := os.ReadFile(path)
	if err != nil {
		log.Warn("boot ID unreadable: claims an earlier boot prepared will not be prepared again", "path", path, "err", err)
		return ""
	}
	return strings.TrimSpace(string(data))
}

// earlierBoot reports whether an earlier boot of the node prepared pc.
// A claim recorded without a boot ID (by an older hwnet) is taken as
// this boot's: answering it from the checkpoint is what that hwnet did.
func (d *Driver) earlierBoot(pc *checkpoint.Claim) bool {
	return d.bootID != "" && pc.BootID != "" && pc.BootID != d.bootID
}

// forgetEarlierBoot strips, from the claims an earlier boot prepared,
// what the node's restart undid: their VF settings and rebinds (the VFs
// came back with the kernel's defaults and drivers), so that neither an
// unprepare nor the recovery of an unfinished prepare "puts back" the
// last boot's state over this one's. The claims stay in the checkpoint,
// holding their devices in the device ledger, until kubelet, starting
// their pods again, prepares them anew (their CDI specs and device-info
// files were on tmpfs) or unprepares them.
func (d *Driver) forgetEarlierBoot() error {
	cp, err := d.store.load()
	if err != nil {
		return err
	}
	n := 0
	for _, pc := range cp.Claims {
		if !d.earlierBoot(pc) {
			continue
		}
		for i := range pc.Devices {
			pc.Devices[i].VF, pc.Devices[i].Rebind = nil, nil
		}
		pc.Unfinished = false
		n++
	}
	if n == 0 {
		return nil
	}
	d.log.Info("claims prepared before the node restarted; kubelet's next prepare makes them anew", "claims", n)
	return d.store.save(cp)
}

package ledger_test

import (
	"context"
	"maps"
	"path/filepath"
	"slices"

	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/node/ledger"
)

// The interleavings' pending VF resets (issue 42): a sandbox's teardown
// that cannot reset its VFs leaves the resets on disk, and the VFs must
// not be handed out until they are done. The world's source lists the
// files (ledger.ResetFiles); the model decides when a reset is done.

func (w *ilWorld) resetDir() string { return filepath.Join(w.dir, vfreset.SubDir) }

// leaveResets leaves the reset of each device pending, as a teardown
// does before it removes the record.
func (w *ilWorld) leaveResets(devices []string) {
	for _, d := range devices {
		p := &vfreset.Pending{Record: vfsettings.Record{PCIAddress: d}, Reason: "interleavings", Since: w.now}
		if err := vfreset.Leave(w.resetDir(), p); err != nil {
			w.t.Fatal(err)
		}
	}
}

func (w *ilWorld) resetDone(d string) {
	if err := vfreset.Done(w.resetDir(), d); err != nil {
		w.t.Fatal(err)
	}
}

// shimDel is a sandbox's DEL whose VF resets stay pending: by the shim
// while the agent is away (the agent then starts, and loads), or by the
// agent when the reset fails (the record goes, then the hold).
func (r *ilRun) shimDel() string {
	id, ok := pickKey(r, r.m.sandboxes)
	if !ok {
		return "nothing: no sandbox"
	}
	sb := r.m.sandboxes[id]
	away := r.rng.IntN(2) == 0
	if away {
		r.w.book.Close()
	}
	r.w.leaveResets(sb.devices)
	for _, d := range sb.devices {
		r.m.resets[d] = true
	}
	delete(r.m.sandboxes, id)
	r.w.removeRecord(id)
	if !away {
		r.w.book.Release(context.Background(), ledger.Holder{Kind: ledger.Container, Container: id})
		return "ok " + id + ", reset failed"
	}
	r.restartBook()
	return "ok " + id + " by the shim, agent restarted"
}

// resetDone is a pending reset the agent performed.
func (r *ilRun) resetDone() string {
	d, ok := pickKey(r, r.m.resets)
	if !ok {
		return "nothing: no reset pending"
	}
	r.w.resetDone(d)
	delete(r.m.resets, d)
	return "ok " + d
}

// drainResets performs every reset still pending.
func (r *ilRun) drainResets() {
	for _, d := range slices.Sorted(maps.Keys(r.m.resets)) {
		r.w.resetDone(d)
	}
	r.m.resets = map[string]bool{}
}

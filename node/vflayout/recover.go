package vflayout

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
)

// standing is the PF's layout fence in force, if any: outside a change,
// one an earlier agent left when it stopped half way, or one a failed
// rollback kept.
func (m *Manager) standing(pf string) (ledger.Fence, bool) {
	for _, f := range m.o.Book.Snapshot().Fences() {
		if f.Key == fenceKey(pf) {
			return f, true
		}
	}
	return ledger.Fence{}, false
}

// recoverOnce, at the first update, undoes each change an earlier agent
// left half way on a PF no layout is declared for now. The Book loaded
// its fence, so none of the PF's VFs was handed out since. A PF with a
// layout declared is brought to it by reconcilePF, from the same fence.
func (m *Manager) recoverOnce(ctx context.Context, layouts []pools.PFLayout) {
	if m.recovered {
		return
	}
	m.recovered = true
	declared := map[string]bool{}
	for _, t := range layouts {
		declared[t.PF] = true
	}
	for _, f := range m.o.Book.Snapshot().Fences() {
		if strings.HasPrefix(f.Key, FenceKeyPrefix) && !declared[f.PF] {
			m.undo(ctx, f)
		}
	}
}

// stoppedHalfWay begins what the Events of an undo say.
const stoppedHalfWay = "an earlier agent stopped half way through the change and no layout is declared for the PF now; "

// undo puts the PF back as it was before the change its fence records,
// and lifts the fence once sysfs shows it so; else the fence stays and
// the PF's VFs stay withdrawn.
func (m *Manager) undo(ctx context.Context, f ledger.Fence) {
	t := pools.PFLayout{PF: f.PF, Layout: &pools.VFLayout{}}
	if f.Layout == nil {
		m.undoFailed(t, errors.New("its fence does not say what the PF had"))
		return
	}
	t.Layout.Name = f.Layout.Name
	m.o.Log.Info("VF layout: undoing the change an earlier agent left half way", "pf", f.PF, "layout", t.Layout.Name)
	start := time.Now()
	err := m.o.Sysfs.Restore(ctx, f.PF, BeforeOf(f.Layout))
	took := time.Since(start)
	if err != nil {
		m.o.Metrics.ObserveVFLayoutChange(f.PF, "rollback_failed", took)
		m.undoFailed(t, err)
		return
	}
	m.o.Metrics.ObserveVFLayoutChange(f.PF, "rolled_back", took)
	m.o.Log.Info("VF layout: the change an earlier agent left is undone", "pf", f.PF, "layout", t.Layout.Name)
	m.o.Events.VFLayoutFailed(describe(t), t.Layout.Name, stoppedHalfWay+"its VFs are back as they were")
	m.lift(f.PF)
}

func (m *Manager) undoFailed(t pools.PFLayout, err error) {
	m.o.Log.Error("VF layout: the change an earlier agent left cannot be undone; the PF stays fenced, its VFs withdrawn",
		"pf", t.PF, "layout", t.Layout.Name, "err", err)
	m.o.Events.VFLayoutFailed(describe(t), t.Layout.Name, stoppedHalfWay+"putting its VFs back failed, they stay withdrawn: "+err.Error())
}

package vflayout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pcidriver"
	"github.com/hwnet-io/hwnet/node/pools"
	"k8s.io/utils/clock"
)

// DefaultSettle is how long a sysfs write may take to show.
const DefaultSettle = pcidriver.DefaultSettle

// A layout that failed is tried again after FirstRetry, then after twice
// as long each time up to MaxRetry: a failure that passes (a driver busy,
// a module loaded late) heals without the admin, and one that does not
// churns the PF's VFs at most every MaxRetry.
const (
	FirstRetry = 30 * time.Second
	MaxRetry   = 10 * time.Minute
)

// Book is what the Manager needs of the device ledger: the fence that
// withdraws a PF, its VFs and their ports from every front end while
// they change, and the fences in force.
type Book interface {
	Fence(ctx context.Context, f ledger.Fence, free bool) error
	Unfence(key string) error
	Snapshot() *ledger.Ledger
}

// FenceKeyPrefix starts the key of the fence a PF's layout change takes.
const FenceKeyPrefix = "vf-layout/"

func fenceKey(pf string) string { return FenceKeyPrefix + pf }

// Options configure a Manager.
type Options struct {
	Sysfs   Sysfs
	Book    Book
	Log     *slog.Logger
	Events  *events.Node
	Metrics *metrics.Metrics
	// Waiting, if not nil, is called when a PF starts waiting for its
	// VFs' holders: the ledger should then be read often, as only
	// reading it tells when they let go.
	Waiting func()
	// Withdrawn, if not nil, is called once a change's fence is taken,
	// before its first write, and returns once every front end lists
	// the PF's VFs withdrawn: kubelet then stops choosing them before
	// they start to go, so that a pod arriving meanwhile gets another VF
	// instead of a refusal.
	Withdrawn func(context.Context)
	// Rebound, if not nil, is the binding each VF a DRA claim has on
	// another driver rests on, by PCI address: a layout is judged by it,
	// so that a claim's driver is no change to wait for.
	Rebound func() map[string]pcidriver.Binding
	// Clock times the retries of a failed layout; nil is the real one.
	Clock clock.WithTicker
}

// Manager brings the PFs to their layouts, one change at a time, on a
// goroutine of its own (Run), from the latest layouts Update gave it.
type Manager struct {
	o       Options
	updates chan []pools.PFLayout
	waiting atomic.Bool
	// Run's goroutine's: why each PF waits, and the layout that failed
	// on each, tried again when its retry is due or the layout changes.
	why    map[string]string
	failed map[string]failure
	// unfit is why each PF cannot take its layout, reported once.
	unfit map[string]string
	// recovered is set once the changes an earlier agent left were seen
	// to.
	recovered bool
}

// New makes a Manager; Run starts it.
func New(o Options) *Manager {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	return &Manager{o: o, updates: make(chan []pools.PFLayout, 1), why: map[string]string{}, failed: map[string]failure{},
		unfit: map[string]string{}}
}

// failure is a layout that failed on a PF: how often in a row, and when
// it is due to be tried again.
type failure struct {
	key   string
	tries int
	next  time.Time
}

// fail records that the layout key failed on pf, and returns how long
// until it is tried again.
func (m *Manager) fail(pf, key string) time.Duration {
	f := m.failed[pf]
	if f.key != key {
		f = failure{key: key}
	}
	f.tries++
	wait := FirstRetry << min(f.tries-1, 10)
	wait = min(wait, MaxRetry)
	f.next = m.o.Clock.Now().Add(wait)
	m.failed[pf] = f
	return wait
}

// nextRetry is when the earliest failed layout is due, if any waits for
// its retry.
func (m *Manager) nextRetry() (time.Time, bool) {
	var next time.Time
	for _, f := range m.failed {
		if !f.next.IsZero() && (next.IsZero() || f.next.Before(next)) {
			next = f.next
		}
	}
	return next, !next.IsZero()
}

// due says whether the layout key may be tried on pf now: it has not
// failed, or its retry is due, which is then taken (a retry that waits
// for holders is tried at each change of the ledger, as a first try is).
func (m *Manager) due(pf, key string) bool {
	f, ok := m.failed[pf]
	switch {
	case !ok || f.key != key || f.next.IsZero():
		return true
	case m.o.Clock.Now().Before(f.next):
		return false
	}
	f.next = time.Time{}
	m.failed[pf] = f
	return true
}

// Update hands the Manager the layouts the PFs should have; it is called
// again whenever the device ledger changes, as a holder letting go may
// let a change start. It never blocks: a newer update replaces one not
// yet taken.
func (m *Manager) Update(layouts []pools.PFLayout) {
	for {
		select {
		case m.updates <- layouts:
			return
		default:
		}
		select {
		case <-m.updates:
		default:
		}
	}
}

// Waiting reports whether a PF waits for its VFs to be free.
func (m *Manager) Waiting() bool { return m.waiting.Load() }

// Run applies each update, and tries again each failed layout when its
// retry is due, until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	var last []pools.PFLayout
	for {
		var retry <-chan time.Time
		var timer clock.Timer
		if next, ok := m.nextRetry(); ok {
			timer = m.o.Clock.NewTimer(next.Sub(m.o.Clock.Now()))
			retry = timer.C()
		}
		select {
		case <-ctx.Done():
		case last = <-m.updates:
			m.reconcile(ctx, last)
		case <-retry:
			m.reconcile(ctx, last)
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// reconcile brings every PF to its layout, or says why it waits or
// cannot take it.
func (m *Manager) reconcile(ctx context.Context, layouts []pools.PFLayout) {
	layouts = m.fitting(layouts)
	m.recoverOnce(ctx, layouts)
	targeted := map[string]bool{}
	var rebound map[string]pcidriver.Binding
	if len(layouts) > 0 && m.o.Rebound != nil {
		rebound = m.o.Rebound() // read once a round: it reads a file
	}
	for _, t := range layouts {
		targeted[t.PF] = true
		if ctx.Err() != nil {
			return
		}
		m.reconcilePF(ctx, t, rebound)
	}
	for pf := range m.why {
		if !targeted[pf] {
			m.setWhy(pools.PFLayout{PF: pf}, "")
		}
	}
	for pf := range m.failed {
		if !targeted[pf] {
			delete(m.failed, pf)
		}
	}
	m.waiting.Store(len(m.why) > 0)
}

func (m *Manager) reconcilePF(ctx context.Context, t pools.PFLayout, rebound map[string]pcidriver.Binding) {
	want := WantOf(t.Layout)
	key := t.Layout.Name + ": " + want.String()
	st, err := m.o.Sysfs.Read(t.PF)
	resting(st, rebound)
	if err != nil {
		m.o.Log.Error("VF layout: cannot read the PF's VFs", "pf", t.PF, "layout", t.Layout.Name, "err", err)
		return
	}
	mode, err := m.o.Sysfs.ESwitchMode(ctx, t.PF, want)
	if err != nil {
		m.modeUnread(t, key, err)
		return
	}
	sfs, err := m.o.Sysfs.SFs(t.PF, want)
	switch {
	case err != nil:
		m.o.Log.Error("VF layout: cannot read the PF's SFs", "pf", t.PF, "layout", t.Layout.Name, "err", err)
		return
	case want.SatisfiedBy(st, mode, sfs):
		delete(m.failed, t.PF)
		m.setWhy(t, "")
		// A fence still standing (an earlier agent stopped after its
		// last write) is done with: sysfs shows the layout.
		m.lift(t.PF)
		return
	case !m.due(t.PF, key):
		return // failed as it stands: tried again when due, or a new layout at once
	}
	f, free := m.fenceFor(t, want, Before{VFs: st.Bindings(), Mode: mode, SFs: sfs, CountsSFs: want.NumSFs != nil})
	// The fence withdraws the PF, its VFs present and to come and their
	// ports from every front end before the first write, and keeps on
	// disk what the change is; the ledger refuses it while any of them is
	// held or a source of holders cannot be read.
	if err := m.o.Book.Fence(ctx, f, free); err != nil {
		m.refused(t, key, err)
		return
	}
	if m.o.Withdrawn != nil {
		m.o.Withdrawn(ctx)
	}
	m.setWhy(t, "")
	m.apply(ctx, t, f.Layout, want, key)
}

// modeUnread reports a layout whose PF's eSwitch mode cannot be read
// (no devlink, devlink failing): nothing is written, and it is tried
// again as a failed change is.
func (m *Manager) modeUnread(t pools.PFLayout, key string, err error) {
	if !m.due(t.PF, key) {
		return // reported; tried again when due
	}
	retry := m.fail(t.PF, key)
	m.o.Log.Error("VF layout not applied: the PF's eSwitch mode cannot be read", "pf", t.PF, "layout", t.Layout.Name, "retryIn", retry, "err", err)
	m.o.Events.VFLayoutFailed(describe(t), t.Layout.Name, fmt.Sprintf("its VFs are untouched (tried again in %s): %v", retry, err))
}

// resting shows each VF of st a claim has on another driver (rebound) on
// the binding it rests on.
func resting(st State, rebound map[string]pcidriver.Binding) {
	for i, vf := range st {
		if b, ok := rebound[vf.Addr]; ok {
			st[i].Driver, st[i].Override = b.Driver, b.Override
		}
	}
}

// fenceFor is the fence the change takes, and whether the PF's VFs and
// SFs must be free for it; now is what the PF has (its mode "" when want
// names none, its SFs unread when want counts none). A PF fenced already
// (an earlier agent stopped half way, a rollback failed) keeps what it
// had before that change, which a failure rolls back to; none of its VFs
// or SFs could be handed out since.
func (m *Manager) fenceFor(t pools.PFLayout, want Want, now Before) (ledger.Fence, bool) {
	f := ledger.Fence{Key: fenceKey(t.PF), PF: t.PF, Reason: fmt.Sprintf("its PF's VF layout %s is being applied", t.Layout.Name),
		Layout: &fenceapi.LayoutChange{Name: t.Layout.Name, Before: now.VFs, ESwitchModeBefore: now.Mode, SFsBefore: now.SFs, Target: want.layout()}}
	old, ok := m.standing(t.PF)
	if !ok || old.Layout == nil {
		return f, true
	}
	m.o.Log.Info("VF layout: the PF is fenced already, by a change that did not end; a failure rolls back to what it had before that one",
		"pf", t.PF, "layout", t.Layout.Name, "since", old.Since)
	f.Since, f.Layout.Before = old.Since, old.Layout.Before
	// A change that left the mode, or the SFs, be had the mode, or the
	// SFs, the PF has now.
	if old.Layout.ESwitchModeBefore != "" {
		f.Layout.ESwitchModeBefore = old.Layout.ESwitchModeBefore
	}
	if old.Layout.Target.NumSFs != nil {
		f.Layout.SFsBefore = old.Layout.SFsBefore
	}
	return f, false
}

// refused reports a fence the ledger refused: a holder or an unknown
// source makes the change wait; anything else (the fence cannot be kept
// on disk) fails it, with no VF touched.
func (m *Manager) refused(t pools.PFLayout, key string, err error) {
	if c, ok := errors.AsType[*ledger.Conflict](err); ok {
		m.setWhy(t, c.Error())
		return
	}
	m.setWhy(t, "")
	retry := m.fail(t.PF, key)
	m.o.Log.Error("VF layout not applied: the PF cannot be fenced", "pf", t.PF, "layout", t.Layout.Name, "retryIn", retry, "err", err)
	m.o.Events.VFLayoutFailed(describe(t), t.Layout.Name,
		fmt.Sprintf("the PF cannot be fenced, its VFs are untouched (tried again in %s): %v", retry, err))
}

// apply changes the PF, reports how it went and lifts its fence unless
// its VFs are in a state no one checked.
func (m *Manager) apply(ctx context.Context, t pools.PFLayout, change *fenceapi.LayoutChange, want Want, key string) {
	start := time.Now()
	m.o.Log.Info("VF layout: changing the PF's VFs", "pf", t.PF, "layout", t.Layout.Name, "want", want.String())
	_, err := m.o.Sysfs.Apply(ctx, t.PF, want, BeforeOf(change))
	took := time.Since(start)
	ae, isApply := errors.AsType[*ApplyError](err)
	switch {
	case err == nil:
		m.o.Metrics.ObserveVFLayoutChange(t.PF, "applied", took)
		m.o.Log.Info("VF layout applied", "pf", t.PF, "layout", t.Layout.Name, "took", took.Round(time.Millisecond))
		m.o.Events.VFLayoutApplied(describe(t), t.Layout.Name, fmt.Sprintf("%s in %s", want, took.Round(time.Millisecond)))
		delete(m.failed, t.PF)
		m.lift(t.PF)
		return
	case isApply && ae.Rollback == nil:
		m.o.Metrics.ObserveVFLayoutChange(t.PF, "rolled_back", took)
	default:
		m.o.Metrics.ObserveVFLayoutChange(t.PF, "rollback_failed", took)
	}
	retry := m.fail(t.PF, key)
	m.o.Log.Error("VF layout not applied", "pf", t.PF, "layout", t.Layout.Name, "retryIn", retry, "err", err)
	m.o.Events.VFLayoutFailed(describe(t), t.Layout.Name, fmt.Sprintf("%v (tried again in %s)", err, retry))
	if isApply && ae.Rollback != nil {
		m.o.Log.Error("VF layout: the PF stays fenced, its VFs withdrawn: they are not as they were", "pf", t.PF)
		return
	}
	m.lift(t.PF)
}

// lift lifts the PF's fence: its VFs are offered again.
func (m *Manager) lift(pf string) {
	if err := m.o.Book.Unfence(fenceKey(pf)); err != nil {
		m.o.Log.Error("VF layout: the PF's fence not lifted, its VFs stay withdrawn", "pf", pf, "err", err)
	}
}

// fitting are the layouts their PFs can take; each one a PF cannot take
// (Unfit) is reported once, and not applied.
func (m *Manager) fitting(layouts []pools.PFLayout) []pools.PFLayout {
	var out []pools.PFLayout
	unfit := map[string]string{}
	for _, t := range layouts {
		why := t.Unfit()
		if why == "" {
			out = append(out, t)
			continue
		}
		unfit[t.PF] = why
		if m.unfit[t.PF] != why {
			m.o.Log.Error("VF layout cannot apply", "pf", t.PF, "layout", t.Layout.Name, "why", why)
			m.o.Events.VFLayoutInvalid(describe(t), t.Layout.Name, why)
		}
	}
	m.unfit = unfit
	return out
}

// setWhy records why the PF waits ("" for not waiting), with an Event
// and the metric when that changes.
func (m *Manager) setWhy(t pools.PFLayout, why string) {
	if m.why[t.PF] == why {
		return
	}
	if why == "" {
		delete(m.why, t.PF)
		m.o.Metrics.SetVFLayoutWaiting(t.PF, false)
		return
	}
	m.why[t.PF] = why
	m.o.Metrics.SetVFLayoutWaiting(t.PF, true)
	m.o.Log.Info("VF layout waits", "pf", t.PF, "layout", t.Layout.Name, "why", why)
	m.o.Events.VFLayoutWaiting(describe(t), t.Layout.Name, why)
	m.waiting.Store(true)
	if m.o.Waiting != nil {
		m.o.Waiting()
	}
}

// describe names the PF as an admin knows it.
func describe(t pools.PFLayout) string {
	if t.PFName == "" {
		return t.PF
	}
	return t.PFName + " (" + t.PF + ")"
}

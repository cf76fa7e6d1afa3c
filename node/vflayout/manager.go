package vflayout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hwnet-io/hwnet/internal/events"
	"github.com/hwnet-io/hwnet/internal/metrics"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/node/pools"
)

// DefaultSettle is how long a sysfs write may take to show.
const DefaultSettle = 10 * time.Second

// Options configure a Manager.
type Options struct {
	Sysfs   Sysfs
	Log     *slog.Logger
	Events  *events.Node
	Metrics *metrics.Metrics
	// Waiting, if not nil, is called when a PF starts waiting for its
	// VFs' holders: the ledger should then be read often, as only
	// reading it tells when they let go.
	Waiting func()
}

// Manager brings the PFs to their layouts, one change at a time, on a
// goroutine of its own (Run), from the latest layouts and ledger Update
// gave it.
type Manager struct {
	o       Options
	updates chan update
	waiting atomic.Bool
	// Run's goroutine's: why each PF waits, and the layout that failed
	// on each, not tried again until the configuration changes.
	why    map[string]string
	failed map[string]string
}

type update struct {
	layouts []pools.PFLayout
	holders *ledger.Ledger
}

// New makes a Manager; Run starts it.
func New(o Options) *Manager {
	return &Manager{o: o, updates: make(chan update, 1), why: map[string]string{}, failed: map[string]string{}}
}

// Update hands the Manager the layouts the PFs should have and who holds
// which device now. It never blocks: a newer update replaces one not yet
// taken.
func (m *Manager) Update(layouts []pools.PFLayout, holders *ledger.Ledger) {
	for {
		select {
		case m.updates <- update{layouts, holders}:
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

// Run applies each update until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case u := <-m.updates:
			m.reconcile(ctx, u)
		}
	}
}

// reconcile brings every PF of u to its layout, or says why it waits.
func (m *Manager) reconcile(ctx context.Context, u update) {
	targeted := map[string]bool{}
	for _, t := range u.layouts {
		targeted[t.PF] = true
		if ctx.Err() != nil {
			return
		}
		m.reconcilePF(ctx, t, u.holders)
	}
	for pf := range m.why {
		if !targeted[pf] {
			m.setWhy(pools.PFLayout{PF: pf}, "")
		}
	}
	m.waiting.Store(len(m.why) > 0)
}

func (m *Manager) reconcilePF(ctx context.Context, t pools.PFLayout, holders *ledger.Ledger) {
	want := WantOf(t.Layout)
	key := t.Layout.Name + ": " + want.String()
	st, err := m.o.Sysfs.Read(t.PF)
	switch {
	case err != nil:
		m.o.Log.Error("VF layout: cannot read the PF's VFs", "pf", t.PF, "layout", t.Layout.Name, "err", err)
		return
	case want.SatisfiedBy(st):
		delete(m.failed, t.PF)
		m.setWhy(t, "")
		return
	case m.failed[t.PF] == key:
		return // failed as it stands; a new layout is tried again
	}
	if why := heldWhy(t.PF, st, holders); why != "" {
		m.setWhy(t, why)
		return
	}
	m.setWhy(t, "")
	m.apply(ctx, t, st, want, key)
}

// apply changes the PF and reports how it went.
func (m *Manager) apply(ctx context.Context, t pools.PFLayout, before State, want Want, key string) {
	start := time.Now()
	m.o.Log.Info("VF layout: changing the PF's VFs", "pf", t.PF, "layout", t.Layout.Name, "want", want.String())
	_, err := m.o.Sysfs.Apply(ctx, t.PF, want, before.Bindings())
	took := time.Since(start)
	var ae *ApplyError
	switch {
	case err == nil:
		m.o.Metrics.ObserveVFLayoutChange(t.PF, "applied", took)
		m.o.Log.Info("VF layout applied", "pf", t.PF, "layout", t.Layout.Name, "took", took.Round(time.Millisecond))
		m.o.Events.VFLayoutApplied(describe(t), t.Layout.Name, fmt.Sprintf("%s in %s", want, took.Round(time.Millisecond)))
		return
	case errors.As(err, &ae) && ae.Rollback == nil:
		m.o.Metrics.ObserveVFLayoutChange(t.PF, "rolled_back", took)
	default:
		m.o.Metrics.ObserveVFLayoutChange(t.PF, "rollback_failed", took)
	}
	m.failed[t.PF] = key
	m.o.Log.Error("VF layout not applied", "pf", t.PF, "layout", t.Layout.Name, "err", err)
	m.o.Events.VFLayoutFailed(describe(t), t.Layout.Name, err.Error())
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

// heldWhy names what holds the PF or one of its VFs, "" when all are
// free; a ledger with a source unread cannot say they are.
func heldWhy(pf string, st State, holders *ledger.Ledger) string {
	if !holders.Complete() {
		if holders == nil {
			return "the device ledger is not read yet"
		}
		return "the device ledger cannot say its VFs are free: " + strings.Join(holders.Unknown, "; ")
	}
	devices := []string{pf}
	for _, vf := range st {
		devices = append(devices, vf.Addr)
	}
	for _, d := range devices {
		if hs := holders.Holders(d); len(hs) > 0 {
			return fmt.Sprintf("%s is held by %s", d, hs[0])
		}
	}
	return ""
}

// describe names the PF as an admin knows it.
func describe(t pools.PFLayout) string {
	if t.PFName == "" {
		return t.PF
	}
	return t.PFName + " (" + t.PF + ")"
}

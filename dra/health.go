package dra

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/hwnet-io/hwnet/node/offer"
)

// DefaultHealthResend is how often the health stream repeats itself when
// nothing changed: kubelet reports a device Unknown once its health is
// older than the lease (kubeletplugin's default, 30 s), so a running
// agent renews it well within that.
const DefaultHealthResend = 10 * time.Second

// goneMessage is the health message of a device that left the published
// set, e.g. its pool left the configuration while a claim holds it.
const goneMessage = "hwnet no longer publishes this device: it left the node's DRA pools"

// goneLease is how long a device that left the published set is still
// reported, as Unknown: kubelet's own lease, after which it forgets it.
const goneLease = 30 * time.Second

// healthBoard is the health of the published devices, taken from the same
// verdicts as their taints (Device.Healthy and Reason), for kubelet's
// health streams (KEP-4680): each change wakes every stream.
type healthBoard struct {
	mu   sync.Mutex
	pool string
	// devices is the health of each published device, by device name:
	// the report's fields that are not the same for every device, which
	// at thousands of devices is half the memory of whole reports.
	devices map[string]deviceHealth
	// gone are devices published before and not now, reported Unknown
	// until their lease ends.
	gone map[string]time.Time
	// changed is closed, and replaced, at each change.
	changed chan struct{}
}

// deviceHealth is one device's health, its message and since when it
// has had them.
type deviceHealth struct {
	health  kubeletplugin.HealthStatus
	message string
	since   time.Time
}

func newHealthBoard(pool string) *healthBoard {
	return &healthBoard{pool: pool, devices: map[string]deviceHealth{}, gone: map[string]time.Time{}, changed: make(chan struct{})}
}

// set makes entries the published devices and wakes the streams when any
// device's health or message changed, or a device came or went.
func (b *healthBoard) set(entries map[string]entry, now time.Time) {
	next := make(map[string]deviceHealth, len(entries))
	for name, e := range entries {
		next[name] = judged(e.dev, now)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	changed := len(next) != len(b.devices)
	for name, h := range b.devices {
		n, ok := next[name]
		switch {
		case !ok:
			b.gone[name] = now.Add(goneLease)
			changed = true
		case n.health != h.health || n.message != h.message:
			changed = true
		default:
			next[name] = h // it has had this health since then
		}
	}
	for name := range next {
		delete(b.gone, name)
	}
	b.devices = next
	if changed {
		close(b.changed)
		b.changed = make(chan struct{})
	}
}

// judged is a device's health as kubelet's stream carries it: Healthy,
// Unhealthy with the reason its taint also carries, or Unknown while the
// device ledger cannot say who holds it (a device whose netdev is away is
// then not judged).
func judged(d *offer.State, now time.Time) deviceHealth {
	h := deviceHealth{health: kubeletplugin.HealthStatusHealthy, since: now}
	switch {
	case d.Unknown != "":
		h.health, h.message = kubeletplugin.HealthStatusUnknown, d.Unknown
	case !d.Healthy:
		h.health, h.message = kubeletplugin.HealthStatusUnhealthy, d.Reason
	}
	return h
}

// report is every published device's health and the gone ones' Unknown,
// sorted by name, and the channel closed at the next change.
func (b *healthBoard) report(now time.Time) (kubeletplugin.DeviceHealthReport, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]kubeletplugin.DeviceHealth, 0, len(b.devices)+len(b.gone))
	for name, h := range b.devices {
		out = append(out, kubeletplugin.DeviceHealth{PoolName: b.pool, DeviceName: name, Health: h.health, LastUpdated: h.since, Message: h.message})
	}
	for name, until := range b.gone {
		if now.After(until) {
			delete(b.gone, name)
			continue
		}
		out = append(out, kubeletplugin.DeviceHealth{PoolName: b.pool, DeviceName: name,
			Health: kubeletplugin.HealthStatusUnknown, LastUpdated: now, Message: goneMessage})
	}
	slices.SortFunc(out, func(x, y kubeletplugin.DeviceHealth) int { return strings.Compare(x.DeviceName, y.DeviceName) })
	return kubeletplugin.DeviceHealthReport{Devices: out}, b.changed
}

// WatchHealthStatus streams the devices' health to kubelet (KEP-4680),
// which shows it in the status of the pods whose claims hold them: first
// every published device, then the whole list again at each change and
// every resend interval, until ctx ends. The verdicts are the ones the
// device taints carry, so the two never disagree.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	resend := time.NewTicker(d.opts.HealthResend)
	defer resend.Stop()
	for {
		report, changed := d.health.report(time.Now())
		select {
		case <-ctx.Done():
			return nil
		case reports <- report:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-resend.C:
		}
	}
}

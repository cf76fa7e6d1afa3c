package delegate

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	mnv1 "github.com/hwnet-io/hwnet/api/multinetwork/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/cache"
	"github.com/hwnet-io/hwnet/cni/status"
	"github.com/hwnet-io/hwnet/node/devinfo"
)

// render is what a publication writes: the status annotations and the
// Event's message.
func (d *Delegator) render(done []attached) (map[string]string, string, error) {
	list, summary := d.statusList(done)
	value, err := status.Encode(list)
	if err != nil {
		return nil, "", err
	}
	annotations := map[string]string{status.Annotation: value}
	if kep := podNetworksStatus(done, list); kep != nil {
		if annotations[mnv1.NetworksStatusAnnotation], err = mnv1.EncodeNetworksStatus(kep); err != nil {
			return nil, "", err
		}
	}
	return annotations, strings.Join(summary, "; "), nil
}

// podNetworksStatus is the KEP's PodStatus.networks for a pod that
// references PodNetworks, nil for others: per network, at most one address
// per family (KEP "Status"), and the network holding the default route.
func podNetworksStatus(done []attached, list []status.NetworkStatus) []mnv1.NetworkStatus {
	var out []mnv1.NetworkStatus
	chosen := slices.ContainsFunc(done, func(a attached) bool { return a.sel.HasDefaultRoute })
	for i, a := range done {
		if a.podNetwork == "" {
			continue
		}
		entry := mnv1.NetworkStatus{Name: a.podNetwork, InterfaceName: a.ifName,
			IsDefaultGW: a.sel.HasDefaultRoute || (a.isDefault && !chosen)}
		ips := onePerFamily(list[i].IPs)
		if len(ips) == 0 {
			out = append(out, entry)
		}
		for _, ip := range ips {
			entry.IP = ip
			out = append(out, entry)
		}
	}
	return out
}

// onePerFamily picks the first IPv4 and first IPv6 address of
// network-status's "ips" (addresses with their prefix length), without
// the prefix length, as the KEP's "ip" is an address.
func onePerFamily(ips []string) []string {
	var v4, v6 string
	for _, ip := range ips {
		p, err := netip.ParsePrefix(ip)
		switch {
		case err != nil:
		case p.Addr().Is4() && v4 == "":
			v4 = p.Addr().String()
		case p.Addr().Is6() && v6 == "":
			v6 = p.Addr().String()
		}
	}
	return slices.DeleteFunc([]string{v4, v6}, func(s string) bool { return s == "" })
}

// statusList builds network-status (NPWG 5) from the attachments made, and
// a one-line summary per attachment for the pod's Event.
func (d *Delegator) statusList(done []attached) ([]status.NetworkStatus, []string) {
	chosen := false
	for _, a := range done {
		chosen = chosen || a.sel.HasDefaultRoute
	}
	list := make([]status.NetworkStatus, 0, len(done))
	summary := make([]string, 0, len(done))
	for _, a := range done {
		st, err := status.FromResult(a.network, a.result, a.ifName)
		if err != nil {
			d.opts.Logger.Warn("network-status entry from a result it cannot read", "network", a.network, "err", err)
			st = status.NetworkStatus{Name: a.network, Interface: a.ifName}
		}
		st.Default = a.isDefault
		st.DeviceInfo = deviceInfo(a)
		st.VF = a.appliedVF()
		switch {
		case a.sel.HasDefaultRoute:
			st.DefaultRoute = a.defaultGateways()
		case a.isDefault && !chosen:
			st.DefaultRoute, _ = status.Gateways(a.result, a.ifName)
		}
		list = append(list, st)
		summary = append(summary, summarize(st))
	}
	return list, summary
}

// deviceInfo is what the attachment's device-info file says now: its
// delegate may have added to what hwnet wrote (device-info spec 1.1.0).
// Read here, in the background, rather than on the ADD's path; a file a
// DEL already removed leaves what hwnet wrote.
func deviceInfo(a attached) *devinfo.DeviceInfo {
	if a.infoFile != "" {
		if updated, err := devinfo.ReadFile(a.infoFile); err == nil {
			return updated
		}
	}
	return a.info
}

func summarize(st status.NetworkStatus) string {
	s := fmt.Sprintf("%s on %s", st.Interface, st.Name)
	if len(st.IPs) > 0 {
		s += " " + strings.Join(st.IPs, ",")
	}
	if st.DeviceInfo != nil && st.DeviceInfo.PCI != nil {
		s += " device " + st.DeviceInfo.PCI.PCIAddress
	}
	return s
}

// statusQueue builds and writes network-status and the pod's Event in the
// background, so an ADD waits on neither the encoding, the API server nor
// client-go's event broadcaster, and keeps only the latest per pod, so a
// slow write for a re-created sandbox never lands after a newer one.
type statusQueue struct {
	sink    StatusSink
	render  func([]attached) (map[string]string, string, error)
	timeout time.Duration
	logger  *slog.Logger
	// claims writes the claims' device status of a publication, when set.
	claims func(context.Context, publication)

	mu      sync.Mutex
	pending map[cache.PodRef]publication
	running map[cache.PodRef]bool
	wg      sync.WaitGroup
}

func newStatusQueue(sink StatusSink, render func([]attached) (map[string]string, string, error), timeout time.Duration, logger *slog.Logger) *statusQueue {
	return &statusQueue{sink: sink, render: render, timeout: timeout, logger: logger,
		pending: map[cache.PodRef]publication{}, running: map[cache.PodRef]bool{}}
}

// publication is what one ADD publishes about its pod: the attachments it
// made, which nothing changes once queued.
type publication []attached

func (q *statusQueue) enqueue(pod cache.PodRef, p publication) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending[pod] = p
	if q.running[pod] {
		return
	}
	q.running[pod] = true
	q.wg.Add(1)
	go q.drain(pod)
}

// busy tells whether the pod's status is queued or being written.
func (q *statusQueue) busy(pod cache.PodRef) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running[pod]
}

func (q *statusQueue) drain(pod cache.PodRef) {
	defer q.wg.Done()
	for {
		p, ok := q.next(pod)
		if !ok {
			return
		}
		q.publish(pod, p)
	}
}

func (q *statusQueue) publish(pod cache.PodRef, p publication) {
	annotations, event, err := q.render(p)
	if err != nil {
		q.logger.Error("network-status", "pod", pod.String(), "err", err)
		return
	}
	q.bounded(func(ctx context.Context) {
		if err := q.sink.SetNetworkStatus(ctx, pod, annotations); err != nil {
			q.logger.Error("writing network-status", "pod", pod.String(), "err", err)
		}
	})
	if q.claims != nil {
		q.bounded(func(ctx context.Context) { q.claims(ctx, p) })
	}
	q.sink.Event(pod, "Normal", "AddedInterfaces", event)
}

// bounded runs one write with its own timeout: a network-status write
// that took all of its time must not leave the claims' status write none.
func (q *statusQueue) bounded(write func(context.Context)) {
	ctx, cancel := context.WithTimeout(context.Background(), q.timeout)
	defer cancel()
	write(ctx)
}

func (q *statusQueue) next(pod cache.PodRef) (publication, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	p, ok := q.pending[pod]
	if !ok {
		delete(q.running, pod)
		return nil, false
	}
	delete(q.pending, pod)
	return p, true
}

// wait returns once every queued write is done, or ctx ends.
func (q *statusQueue) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { q.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("network-status writes still pending: %w", ctx.Err())
	}
}

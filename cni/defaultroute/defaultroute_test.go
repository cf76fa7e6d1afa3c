package defaultroute

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/osthread"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// pod is a network namespace laid out as a pod's after its attachments:
// eth0 of the cluster-wide default network with IPv4 and IPv6 default
// routes, net1 with both families and no default route, net2 with IPv4
// only. Each is a veth whose peer stays in the namespace.
type pod struct {
	path string
	h    *netlink.Handle
}

var podLinks = []struct {
	name  string
	addrs []string
}{
	{"eth0", []string{"10.10.0.2/24", "fd00:10::2/64"}},
	{"net1", []string{"10.20.0.2/24", "fd00:20::2/64"}},
	{"net2", []string{"10.30.0.2/24"}},
}

func newPod(t *testing.T) *pod {
	t.Helper()
	vnodetest.RequireRoot(t)
	name := fmt.Sprintf("hwnet-dr-%d-%d", os.Getpid(), time.Now().UnixNano())
	createNetns(t, name)
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("delete netns %s: %v", name, err)
		}
	})
	p := &pod{path: filepath.Join("/run/netns", name)}
	ns, err := netns.GetFromPath(p.path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	if p.h, err = netlink.NewHandleAt(ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.h.Close)
	for _, l := range podLinks {
		p.addLink(t, l.name, l.addrs)
	}
	p.addDefault(t, "eth0", "10.10.0.1", 0)
	p.addDefault(t, "eth0", "fd00:10::1", 0)
	return p
}

// createNetns creates a named netns on a thread of its own (see
// osthread.Run), so no thread of the test is left in it.
func createNetns(t *testing.T, name string) {
	t.Helper()
	err := osthread.Run(func() error {
		h, err := netns.NewNamed(name)
		if err != nil {
			return err
		}
		return h.Close()
	})
	if err != nil {
		t.Fatalf("create netns %s: %v", name, err)
	}
}

func (p *pod) addLink(t *testing.T, name string, addrs []string) {
	t.Helper()
	peer := name + "p"
	if err := p.h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peer}); err != nil {
		t.Fatalf("add veth %s: %v", name, err)
	}
	link := p.link(t, name)
	for _, a := range addrs {
		ipnet, err := netlink.ParseIPNet(a)
		if err != nil {
			t.Fatal(err)
		}
		// No duplicate address detection: a tentative address cannot
		// be a route's source and the test need not wait for DAD.
		if err := p.h.AddrAdd(link, &netlink.Addr{IPNet: ipnet, Flags: unix.IFA_F_NODAD}); err != nil {
			t.Fatalf("add %s to %s: %v", a, name, err)
		}
	}
	for _, n := range []string{peer, name} {
		if err := p.h.LinkSetUp(p.link(t, n)); err != nil {
			t.Fatalf("set %s up: %v", n, err)
		}
	}
}

func (p *pod) link(t *testing.T, name string) netlink.Link {
	t.Helper()
	link, err := p.h.LinkByName(name)
	if err != nil {
		t.Fatalf("find %s: %v", name, err)
	}
	return link
}

func (p *pod) addDefault(t *testing.T, ifName, gw string, metric int) {
	t.Helper()
	ip := net.ParseIP(gw)
	r := netlink.Route{LinkIndex: p.link(t, ifName).Attrs().Index, Dst: defaultDst(ip), Gw: ip, Priority: metric}
	if err := p.h.RouteAdd(&r); err != nil {
		t.Fatalf("add default via %s on %s: %v", gw, ifName, err)
	}
}

// addMultipath adds a default route of metric 7 with a next hop per
// "gateway@ifname".
func (p *pod) addMultipath(t *testing.T, hops ...string) {
	t.Helper()
	r := netlink.Route{Priority: 7}
	for _, hop := range hops {
		gw, ifName, _ := strings.Cut(hop, "@")
		ip := net.ParseIP(gw)
		r.Dst = defaultDst(ip)
		r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{LinkIndex: p.link(t, ifName).Attrs().Index, Gw: ip})
	}
	if err := p.h.RouteAdd(&r); err != nil {
		t.Fatalf("add multipath default route %q: %v", hops, err)
	}
}

// defaults lists the main table's default routes as "ifname via gw metric
// n", next hops joined by " + ", sorted.
func (p *pod) defaults(t *testing.T) []string {
	t.Helper()
	routes, err := p.h.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	var list []string
	for _, r := range routes {
		if !isDefault(r) {
			continue
		}
		hops := []*netlink.NexthopInfo{{LinkIndex: r.LinkIndex, Gw: r.Gw}}
		if len(r.MultiPath) > 0 {
			hops = r.MultiPath
		}
		var names []string
		for _, hop := range hops {
			link, err := p.h.LinkByIndex(hop.LinkIndex)
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, fmt.Sprintf("%s via %s", link.Attrs().Name, hop.Gw))
		}
		list = append(list, fmt.Sprintf("%s metric %d", strings.Join(names, " + "), r.Priority))
	}
	slices.Sort(list)
	return list
}

func ips(list ...string) []net.IP {
	var out []net.IP
	for _, s := range list {
		out = append(out, net.ParseIP(s))
	}
	return out
}

func TestSpec4_1_2_1_9_Apply(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, p *pod)
		gateways []net.IP
		want     []string
	}{{
		name:     "4.1.2.1.9 one IPv4 gateway clears both of the default network's routes",
		gateways: ips("10.20.0.1"),
		want:     []string{"net1 via 10.20.0.1 metric 1"},
	}, {
		name:     "4.1.2.1.9 gateways of both families get metrics in list order",
		gateways: ips("fd00:20::1", "10.20.0.1", "fd00:20::fe"),
		want: []string{
			"net1 via 10.20.0.1 metric 2",
			"net1 via fd00:20::1 metric 1",
			"net1 via fd00:20::fe metric 3",
		},
	}, {
		name:     "4.1.2.1.9 an empty list only clears the other interfaces' routes",
		gateways: nil,
		want:     nil,
	}, {
		name: "4.1.2.1.9 the attachment's own default routes of a listed family are replaced, others kept",
		setup: func(t *testing.T, p *pod) {
			p.addDefault(t, "net1", "10.20.0.254", 10)
			p.addDefault(t, "net1", "fd00:20::fe", 100)
		},
		gateways: ips("10.20.0.1"),
		want:     []string{"net1 via 10.20.0.1 metric 1", "net1 via fd00:20::fe metric 100"},
	}, {
		name: "4.1.2.1.9 default routes of every other interface go",
		setup: func(t *testing.T, p *pod) {
			p.addDefault(t, "net2", "10.30.0.1", 5)
		},
		gateways: ips("fd00:20::1"),
		want:     []string{"net1 via fd00:20::1 metric 1"},
	}, {
		name: "4.1.2.1.9 a multipath default route goes if one next hop is another interface's, stays if all are the attachment's",
		setup: func(t *testing.T, p *pod) {
			p.addMultipath(t, "10.10.0.1@eth0", "10.30.0.1@net2")
			p.addMultipath(t, "fd00:20::1@net1", "fd00:20::3@net1")
		},
		gateways: ips("10.20.0.1"),
		want:     []string{"net1 via 10.20.0.1 metric 1", "net1 via fd00:20::1 + net1 via fd00:20::3 metric 7"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod(t)
			if tt.setup != nil {
				tt.setup(t, p)
			}
			for _, round := range []string{"first", "second"} {
				if err := Apply(context.Background(), p.path, "net1", tt.gateways); err != nil {
					t.Fatalf("%s Apply: %v", round, err)
				}
				if got := p.defaults(t); !slices.Equal(got, tt.want) {
					t.Errorf("default routes after the %s Apply = %q, want %q", round, got, tt.want)
				}
			}
		})
	}
}

func TestSpec4_1_2_1_9_Errors(t *testing.T) {
	tests := []struct {
		name     string
		ifName   string
		gateways []net.IP
		wantErr  []string
	}{{
		// The kernel refuses an IPv6 gateway on no IPv6 subnet of the
		// link, although the link has an IPv6 link-local address.
		name:     "4.1.2.1.9 IPv6 gateway on an IPv4-only interface",
		ifName:   "net2",
		gateways: ips("fd00:30::1"),
		wantErr:  []string{"interface net2", "add default route default (IPv6) via fd00:30::1", "metric 1", "no route to host"},
	}, {
		name:     "4.1.2.1.9 IPv4 gateway on no subnet of the interface",
		ifName:   "net1",
		gateways: ips("10.20.0.1", "192.0.2.1"),
		wantErr:  []string{"interface net1", "via 192.0.2.1", "metric 2", "network is unreachable"},
	}, {
		name:     "4.1.2.1.9 gateway that is no address",
		ifName:   "net1",
		gateways: []net.IP{{10, 20, 0}},
		wantErr:  []string{"interface net1", `gateways[0] "?0a1400" is not a gateway address`},
	}, {
		name:     "4.1.2.1.9 unspecified gateway",
		ifName:   "net1",
		gateways: ips("0.0.0.0"),
		wantErr:  []string{`gateways[0] "0.0.0.0" is not a gateway address`},
	}, {
		name:     "4.1.2.1.9 missing interface",
		ifName:   "net9",
		gateways: ips("10.20.0.1"),
		wantErr:  []string{"interface net9", "find interface"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod(t)
			before := p.defaults(t)
			err := Apply(context.Background(), p.path, tt.ifName, tt.gateways)
			if err == nil {
				t.Fatalf("Apply succeeded with default routes %q", p.defaults(t))
			}
			t.Log(err)
			for _, want := range append(tt.wantErr, "netns "+p.path) {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not contain %q", err, want)
				}
			}
			// A failed Apply must not leave the pod without its default route.
			if got := p.defaults(t); !slices.Contains(got, "eth0 via 10.10.0.1 metric 0") {
				t.Errorf("default routes after a failed Apply = %q, were %q", got, before)
			}
		})
	}
}

func TestSpec4_1_2_1_9_CancelledContextChangesNothing(t *testing.T) {
	p := newPod(t)
	before := p.defaults(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Apply(ctx, p.path, "net1", ips("10.20.0.1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Apply with a cancelled context = %v, want context.Canceled", err)
	}
	if got := p.defaults(t); !slices.Equal(got, before) {
		t.Errorf("default routes = %q, want unchanged %q", got, before)
	}
}

func TestMissingNetnsIsNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gone")
	err := Apply(context.Background(), path, "net1", nil)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "net1") {
		t.Errorf("Apply in a missing netns = %v, want an error naming %s and net1", err, path)
	}
}

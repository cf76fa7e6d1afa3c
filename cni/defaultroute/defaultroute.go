package defaultroute

import (
	"context"
	"fmt"
	"net"
	"slices"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// firstMetric is the metric of the first gateway's route; each later one
// gets the next. It is not 0 because the kernel stores an IPv6 route of
// metric 0 at 1024, which would put the first gateway behind the others.
const firstMetric = 1

// Apply makes ifName the pod's only default-route interface: it deletes
// every IPv4 and IPv6 default route (main table) whose output interface is
// not ifName, a multipath one as soon as one next hop leaves elsewhere,
// and adds one default route per gateway on ifName (metric by list order
// from 1, family by the gateway's address family), replacing existing
// ones: for a family with gateways, ifName's default routes are then exactly
// those. It adds before it deletes, so a gateway the kernel refuses leaves
// the pod's routes as they were. An empty list, which 4.1.2.1.9 allows,
// only removes the other interfaces' default routes. Applying the same list
// again changes nothing.
func Apply(ctx context.Context, netnsPath, ifName string, gateways []net.IP) error {
	if err := apply(ctx, netnsPath, ifName, gateways); err != nil {
		return fmt.Errorf("default route of netns %s interface %s: %w", netnsPath, ifName, err)
	}
	return nil
}

func apply(ctx context.Context, netnsPath, ifName string, gateways []net.IP) error {
	h, err := handleAt(netnsPath)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(ifName)
	if err != nil {
		return fmt.Errorf("find interface: %w", err)
	}
	want, err := routesVia(link.Attrs().Index, gateways)
	if err != nil {
		return err
	}
	// Adding before deleting leaves the pod a default route throughout.
	for _, r := range want {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := h.RouteReplace(&r); err != nil {
			return fmt.Errorf("add default route %s: %w", describe(r), err)
		}
	}
	return deleteStale(ctx, h, link.Attrs().Index, want)
}

// handleAt opens a netlink handle in the network namespace at path.
func handleAt(path string) (*netlink.Handle, error) {
	ns, err := netns.GetFromPath(path)
	if err != nil {
		return nil, fmt.Errorf("open netns: %w", err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("open netlink in netns: %w", err)
	}
	return h, nil
}

// routesVia returns the default routes through gateways on the link with
// index ifindex, with metrics in list order.
func routesVia(ifindex int, gateways []net.IP) ([]netlink.Route, error) {
	routes := make([]netlink.Route, 0, len(gateways))
	for i, gw := range gateways {
		if len(gw) != net.IPv4len && len(gw) != net.IPv6len || gw.IsUnspecified() {
			return nil, fmt.Errorf("gateways[%d] %q is not a gateway address", i, gw.String())
		}
		routes = append(routes, netlink.Route{
			LinkIndex: ifindex,
			Dst:       defaultDst(gw),
			Gw:        gw,
			Priority:  firstMetric + i,
			Table:     unix.RT_TABLE_MAIN,
			Family:    family(gw),
		})
	}
	return routes, nil
}

func family(ip net.IP) int {
	if ip.To4() != nil {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// defaultDst is the default destination of gw's address family.
func defaultDst(gw net.IP) *net.IPNet {
	if family(gw) == netlink.FAMILY_V4 {
		return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 8*net.IPv4len)}
	}
	return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 8*net.IPv6len)}
}

// deleteStale deletes the main table's default routes that leave through
// another interface than ifindex, and those of ifindex that want does not
// have in a family it has routes for.
func deleteStale(ctx context.Context, h *netlink.Handle, ifindex int, want []netlink.Route) error {
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	for _, r := range routes {
		if !isDefault(r) || !stale(r, ifindex, want) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := h.RouteDel(&r); err != nil {
			return fmt.Errorf("delete default route %s: %w", describe(r), err)
		}
	}
	return nil
}

func isDefault(r netlink.Route) bool {
	if r.Family != netlink.FAMILY_V4 && r.Family != netlink.FAMILY_V6 {
		return false
	}
	if r.Dst == nil {
		return true
	}
	ones, _ := r.Dst.Mask.Size()
	return ones == 0
}

// stale reports whether the default route r must go.
func stale(r netlink.Route, ifindex int, want []netlink.Route) bool {
	if !onlyVia(r, ifindex) {
		return true
	}
	sameFamily := func(w netlink.Route) bool { return w.Family == r.Family }
	if !slices.ContainsFunc(want, sameFamily) {
		return false
	}
	return !slices.ContainsFunc(want, func(w netlink.Route) bool {
		return w.Gw.Equal(r.Gw) && w.Priority == r.Priority
	})
}

// onlyVia reports whether every next hop of r leaves through ifindex.
func onlyVia(r netlink.Route, ifindex int) bool {
	if len(r.MultiPath) == 0 {
		return r.LinkIndex == ifindex
	}
	return !slices.ContainsFunc(r.MultiPath, func(nh *netlink.NexthopInfo) bool { return nh.LinkIndex != ifindex })
}

// describe names a route in error messages as ip route does.
func describe(r netlink.Route) string {
	s := "default"
	if r.Family == netlink.FAMILY_V6 {
		s = "default (IPv6)"
	}
	if r.Gw != nil {
		s += " via " + r.Gw.String()
	}
	if len(r.MultiPath) > 0 {
		s += fmt.Sprintf(" with %d next hops", len(r.MultiPath))
	}
	return fmt.Sprintf("%s ifindex %d metric %d", s, r.LinkIndex, r.Priority)
}

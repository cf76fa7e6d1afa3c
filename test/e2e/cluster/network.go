package cluster

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// setUpNetwork finds the node IP, the IPv4 address of the link holding the
// default route in the network namespace nsName, and puts the kubernetes
// Service's address on the namespace's loopback.
func setUpNetwork(nsName string) (net.IP, error) {
	h, err := openNetlink(nsName)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	ip, err := defaultRouteAddress(h)
	if err != nil {
		return nil, fmt.Errorf("node IP in netns %s: %w", nsName, err)
	}
	return ip, addServiceAddress(h)
}

func defaultRouteAddress(h *netlink.Handle) (net.IP, error) {
	routes, err := h.RouteList(nil, netlink.FAMILY_V4)
	if err != nil {
		return nil, err
	}
	for _, r := range routes {
		if r.Dst != nil && !r.Dst.IP.IsUnspecified() {
			continue
		}
		link, err := h.LinkByIndex(r.LinkIndex)
		if err != nil {
			return nil, err
		}
		addrs, err := h.AddrList(link, netlink.FAMILY_V4)
		if err != nil || len(addrs) == 0 {
			return nil, errors.Join(err, fmt.Errorf("%s holds the default route but has no IPv4 address", link.Attrs().Name))
		}
		return addrs[0].IP, nil
	}
	return nil, errors.New("no default route (the spec needs a NIC with defaultRoute)")
}

// addServiceAddress puts serviceIP on lo: kube-apiserver listens on
// the Service's port, so in-cluster clients reach it there without
// kube-proxy.
func addServiceAddress(h *netlink.Handle) error {
	lo, err := h.LinkByName("lo")
	if err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: net.ParseIP(serviceIP), Mask: net.CIDRMask(32, 32)}}
	if err := h.AddrReplace(lo, addr); err != nil {
		return fmt.Errorf("add %s to lo: %w", addr.IPNet, err)
	}
	return nil
}

package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/hwnet-io/hwnet/internal/osthread"
)

// The fabric joins the nodes of a cluster of several: a bridge in the
// control plane's network namespace, with one veth to each worker's.
// Node i (the control plane is 0) has the fabric address 10.250.0.<i+1>,
// its InternalIP, and the pod subnet 10.244.<i>.0/24; every node routes
// the others' pod subnets through their fabric addresses, so pods on
// different nodes reach each other on the default network without
// encapsulation, as a flat L3 pod network (Calico without overlay, say)
// would have it. A one-node cluster has no fabric.
const (
	fabricBridge = "hwnet-fabric"
	// fabricLink is a worker's end of its veth to the bridge.
	fabricLink = "fabric0"
	fabricBits = 24
	// maxNodes bounds a cluster by its fabric and pod subnets.
	maxNodes = 200
)

// fabricIP is node i's address on the fabric.
func fabricIP(i int) net.IP { return net.IPv4(10, 250, 0, byte(i+1)) }

// podSubnetOf is node i's pod subnet.
func podSubnetOf(i int) *net.IPNet {
	return &net.IPNet{IP: net.IPv4(10, 244, byte(i), 0), Mask: net.CIDRMask(24, 32)}
}

// fabricPeer is the control plane's end of worker i's veth: at most 15
// bytes, as every netdev name.
func fabricPeer(i int) string { return fmt.Sprintf("fab-%d", i) }

// openNetlink returns a netlink handle in the named network namespace.
func openNetlink(nsName string) (*netlink.Handle, error) {
	ns, err := netns.GetFromPath(netnsPath(nsName))
	if err != nil {
		return nil, fmt.Errorf("open netns %s: %w", nsName, err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return nil, fmt.Errorf("netlink in %s: %w", nsName, err)
	}
	return h, nil
}

// setUpFabricBridge makes the bridge in the control plane's namespace with
// its fabric address and returns that address, the node's IP.
func setUpFabricBridge(nsName string) (net.IP, error) {
	h, err := openNetlink(nsName)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: fabricBridge}}
	if err := h.LinkAdd(br); err != nil {
		return nil, fmt.Errorf("add bridge %s in %s: %w", fabricBridge, nsName, err)
	}
	ip := fabricIP(0)
	if err := addrUp(h, br, ip); err != nil {
		return nil, err
	}
	return ip, enableForwarding(nsName)
}

// addrUp gives link ip on the fabric and sets it up.
func addrUp(h *netlink.Handle, link netlink.Link, ip net.IP) error {
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip, Mask: net.CIDRMask(fabricBits, 32)}}
	if err := h.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("add %s to %s: %w", addr.IPNet, link.Attrs().Name, err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up: %w", link.Attrs().Name, err)
	}
	return nil
}

// joinFabric connects worker i's namespace to the control plane's bridge
// and returns the worker's fabric address, its node IP.
func joinFabric(cpNetns, workerNetns string, i int) (net.IP, error) {
	cp, err := openNetlink(cpNetns)
	if err != nil {
		return nil, err
	}
	defer cp.Close()
	w, err := openNetlink(workerNetns)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if err := addFabricVeth(cp, workerNetns, i); err != nil {
		return nil, err
	}
	link, err := w.LinkByName(fabricLink)
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", fabricLink, workerNetns, err)
	}
	ip := fabricIP(i)
	if err := addrUp(w, link, ip); err != nil {
		return nil, err
	}
	return ip, enableForwarding(workerNetns)
}

// addFabricVeth makes worker i's veth in the control plane's namespace,
// moves its worker end into the worker's and enslaves the other to the
// bridge.
func addFabricVeth(cp *netlink.Handle, workerNetns string, i int) error {
	ns, err := netns.GetFromPath(netnsPath(workerNetns))
	if err != nil {
		return fmt.Errorf("open netns %s: %w", workerNetns, err)
	}
	defer ns.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: fabricPeer(i)}, PeerName: fabricLink,
		PeerNamespace: netlink.NsFd(ns)}
	if err := cp.LinkAdd(veth); err != nil {
		return fmt.Errorf("add veth %s/%s: %w", fabricPeer(i), fabricLink, err)
	}
	br, err := cp.LinkByName(fabricBridge)
	if err != nil {
		return fmt.Errorf("bridge %s: %w", fabricBridge, err)
	}
	if err := cp.LinkSetMaster(veth, br); err != nil {
		return fmt.Errorf("enslave %s to %s: %w", fabricPeer(i), fabricBridge, err)
	}
	return cp.LinkSetUp(veth)
}

// routePodSubnets routes, in node self's namespace, the pod subnet of
// every other node of n through its fabric address.
func routePodSubnets(nsName string, self, n int) error {
	h, err := openNetlink(nsName)
	if err != nil {
		return err
	}
	defer h.Close()
	link, err := h.LinkByName(fabricDevice(self))
	if err != nil {
		return fmt.Errorf("fabric link in %s: %w", nsName, err)
	}
	for i := range n {
		if i == self {
			continue
		}
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: podSubnetOf(i), Gw: fabricIP(i)}
		if err := h.RouteReplace(route); err != nil {
			return fmt.Errorf("route %s via %s in %s: %w", route.Dst, route.Gw, nsName, err)
		}
	}
	return nil
}

// fabricDevice is node i's link on the fabric.
func fabricDevice(i int) string {
	if i == 0 {
		return fabricBridge
	}
	return fabricLink
}

// forwardServiceAddress makes the kubernetes Service's address reach
// kube-apiserver on the control plane from a worker's namespace, as
// kube-proxy would: a route that picks the fabric address as the source,
// and DNAT for the node's own processes (hostNetwork pods, hwnet-agent)
// and for its pods.
func forwardServiceAddress(ctx context.Context, nsName string, self int) error {
	h, err := openNetlink(nsName)
	if err != nil {
		return err
	}
	link, err := h.LinkByName(fabricLink)
	if err == nil {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: fabricIP(0), Src: fabricIP(self),
			Dst: &net.IPNet{IP: net.ParseIP(serviceIP), Mask: net.CIDRMask(32, 32)}}
		err = h.RouteReplace(route)
	}
	h.Close()
	if err != nil {
		return fmt.Errorf("route to %s in %s: %w", serviceIP, nsName, err)
	}
	to := net.JoinHostPort(fabricIP(0).String(), fmt.Sprint(apiserverPort))
	for _, chain := range []string{"OUTPUT", "PREROUTING"} {
		if err := iptables(ctx, nsName, "-t", "nat", "-A", chain, "-d", serviceIP+"/32", "-p", "tcp",
			"--dport", fmt.Sprint(apiserverPort), "-j", "DNAT", "--to-destination", to); err != nil {
			return err
		}
	}
	return nil
}

// iptables runs iptables in the named network namespace.
func iptables(ctx context.Context, nsName string, args ...string) error {
	argv := append([]string{"--net=" + netnsPath(nsName), "--", "iptables", "-w"}, args...)
	out, err := exec.CommandContext(ctx, "nsenter", argv...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s in %s: %w: %s", strings.Join(args, " "), nsName, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// enableForwarding lets the namespace route between its pods and the
// fabric: net.ipv4.ip_forward is per network namespace, and
// /proc/sys/net shows the namespace of the thread that opens it.
func enableForwarding(nsName string) error {
	ns, err := netns.GetFromPath(netnsPath(nsName))
	if err != nil {
		return fmt.Errorf("open netns %s: %w", nsName, err)
	}
	defer ns.Close()
	return osthread.Run(func() error {
		if err := netns.Set(ns); err != nil {
			return fmt.Errorf("enter netns %s: %w", nsName, err)
		}
		if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
			return fmt.Errorf("net.ipv4.ip_forward in %s: %w", nsName, err)
		}
		return nil
	})
}

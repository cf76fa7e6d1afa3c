package virtualnode

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// SetNumVFs writes sriov_numvfs of the PF at pf, as `echo n >
// sriov_numvfs` does: VFs appear bound to the PF's VF driver, each with its
// netdev and veth, or disappear with theirs. Like the kernel it refuses to
// go from one non-zero count to another directly, so it goes through 0.
func (n *Node) SetNumVFs(ctx context.Context, pf string, num int) error {
	n.lock()
	defer n.mu.Unlock()
	if err := n.announced(n.setNumVFs(ctx, pf, num)); err != nil {
		return fmt.Errorf("set sriov_numvfs of %s to %d: %w", pf, num, err)
	}
	return nil
}

func (n *Node) setNumVFs(ctx context.Context, addr string, num int) error {
	pf, err := n.function(addr)
	if err != nil {
		return err
	}
	switch {
	case pf.SRIOV == nil:
		return errors.New("not an SR-IOV physical function")
	case num < 0 || num > pf.SRIOV.TotalVFs:
		return fmt.Errorf("out of range 0-%d (sriov_totalvfs)", pf.SRIOV.TotalVFs)
	case !pf.hasNetdevDriver():
		return fmt.Errorf("driver %q cannot enable SR-IOV", pf.Driver)
	case num == pf.SRIOV.NumVFs:
		return nil
	}
	// The count is written before the VFs change, as the kernel's read
	// of sriov_numvfs shows the new count before its write returns: a
	// program that sees the VFs change may write the next count at once.
	if pf.SRIOV.NumVFs > 0 {
		if err := n.disableVFs(ctx, pf); err != nil {
			return err
		}
	}
	if num > 0 {
		if err := n.enableVFs(ctx, pf, num); err != nil {
			return err
		}
	}
	return n.save()
}

// disableVFs removes every VF of the PF.
func (n *Node) disableVFs(ctx context.Context, pf *Function) error {
	if err := n.writeNumVFs(pf, 0); err != nil {
		return err
	}
	for _, f := range slices.Clone(n.st.Functions) {
		if f.PF != pf.Addr {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := n.removeFunction(f); err != nil {
			return err
		}
	}
	return nil
}

// enableVFs adds num VFs to a PF that has none.
func (n *Node) enableVFs(ctx context.Context, pf *Function, num int) error {
	if err := n.writeNumVFs(pf, num); err != nil {
		return err
	}
	vfs := make([]*Function, num)
	for i := range vfs {
		vfs[i] = n.st.newVF(pf, i)
		n.st.attachDriver(vfs[i])
	}
	if err := n.changeLinks(func(ls *links) error { return ls.add(ctx, n.st, vfs) }); err != nil {
		return err
	}
	if err := n.writeFunctions(vfs); err != nil {
		return err
	}
	for _, vf := range vfs {
		n.pending = append(n.pending, pciUEvent{"add", vf})
		if vf.Driver != "" {
			n.pending = append(n.pending, pciUEvent{"bind", vf})
		}
	}
	n.st.Functions = append(n.st.Functions, vfs...)
	return nil
}

func (n *Node) writeNumVFs(pf *Function, num int) error {
	pf.SRIOV.NumVFs = num
	l := n.layout()
	l.replace(pf.SysPath+"/sriov_numvfs", strconv.Itoa(num)+"\n")
	return l.Err()
}

// RemoveVF hot-unplugs one VF, as writing 1 to its remove attribute does:
// its directory, links and veth go. Like the kernel it leaves the PF's
// sriov_numvfs as it was.
func (n *Node) RemoveVF(ctx context.Context, addr string) error {
	n.lock()
	defer n.mu.Unlock()
	if err := n.announced(n.removeVF(ctx, addr)); err != nil {
		return fmt.Errorf("remove VF %s: %w", addr, err)
	}
	return nil
}

func (n *Node) removeVF(ctx context.Context, addr string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f, err := n.function(addr)
	if err != nil {
		return err
	}
	if !f.IsVF() {
		return errors.New("not a virtual function")
	}
	if err := n.removeFunction(f); err != nil {
		return err
	}
	return n.save()
}

// removeFunction deletes a function's veth, tree entries and state.
func (n *Node) removeFunction(f *Function) error {
	if f.Netdev != nil {
		if err := n.changeLinks(func(ls *links) error { return ls.del(f) }); err != nil {
			return err
		}
	}
	l := n.layout()
	l.removeFunction(f)
	if err := l.Err(); err != nil {
		return err
	}
	n.st.Functions = slices.DeleteFunc(n.st.Functions, func(g *Function) bool { return g == f })
	if f.Driver != "" {
		n.pending = append(n.pending, pciUEvent{"unbind", f})
	}
	n.pending = append(n.pending, pciUEvent{"remove", f})
	return nil
}

// LoadDriver makes the driver's directory under bus/pci/drivers, as
// loading its module does: a driver no function uses yet (vfio-pci on a
// node whose VFs are all on their netdev driver) can then be asked for.
func (n *Node) LoadDriver(driver string) error {
	if err := checkDriverName(driver); err != nil {
		return fmt.Errorf("load driver %q: %w", driver, err)
	}
	n.lock()
	defer n.mu.Unlock()
	l := n.layout()
	l.ensureDriver("bus/pci/drivers/" + driver)
	return l.Err()
}

// BindDriver binds the function at addr to driver, as unbind, then
// driver_override and bind do. vfio-pci takes the netdev, its veth and RDMA
// device away and adds /dev/vfio/<group>; uio_pci_generic and igb_uio do
// the same but add uio/uioN and /dev/uioN; a netdev driver brings a new
// netdev and veth; "" leaves the function unbound.
func (n *Node) BindDriver(ctx context.Context, addr, driver string) error {
	n.lock()
	defer n.mu.Unlock()
	if err := n.announced(n.bindDriver(ctx, addr, driver)); err != nil {
		return fmt.Errorf("bind %s to %q: %w", addr, driver, err)
	}
	return nil
}

func (n *Node) bindDriver(ctx context.Context, addr, driver string) error {
	f, err := n.function(addr)
	if err != nil {
		return err
	}
	if err := checkBind(f, driver); err != nil {
		return err
	}
	if driver == f.Driver {
		return nil
	}
	if f.Netdev != nil {
		if err := n.changeLinks(func(ls *links) error { return ls.del(f) }); err != nil {
			return err
		}
	}
	l := n.layout()
	l.removeBinding(f)
	if f.Driver != "" {
		n.pending = append(n.pending, pciUEvent{"unbind", f})
	}
	f.Driver = driver
	n.st.attachDriver(f)
	if err := n.changeLinks(func(ls *links) error { return ls.add(ctx, n.st, []*Function{f}) }); err != nil {
		return err
	}
	l.writeBinding(f)
	if err := l.Err(); err != nil {
		return err
	}
	if driver != "" {
		n.pending = append(n.pending, pciUEvent{"bind", f})
	}
	return n.save()
}

// checkBind refuses what the kernel refuses: a root port without its
// driver, and a PF without a driver that keeps its VFs.
func checkBind(f *Function, driver string) error {
	if f.Bridge != nil {
		return errors.New("a root port keeps pcieport")
	}
	if driver != "" {
		if err := checkDriverName(driver); err != nil {
			return err
		}
	}
	if f.SRIOV != nil && f.SRIOV.NumVFs > 0 && !makesNetdev(driver) {
		return fmt.Errorf("the PF has %d VFs: set sriov_numvfs to 0 first", f.SRIOV.NumVFs)
	}
	return nil
}

// SetLinkUp sets a function's netdev up or down, as `ip link set` does,
// in the netns and in the tree's operstate and carrier; the representor
// sees its lower layer go down.
func (n *Node) SetLinkUp(ctx context.Context, ifname string, up bool) error {
	n.lock()
	defer n.mu.Unlock()
	netdev := func(f *Function) *Netdev { return f.Netdev }
	err := n.changeLink(ctx, ifname, netdev, up, func(f *Function) {
		f.Netdev.Up = up
		f.Netdev.OperState, f.Representor.OperState = "down", "lowerlayerdown"
		if up {
			f.Netdev.OperState, f.Representor.OperState = "up", "up"
		}
	})
	if err != nil {
		return fmt.Errorf("set link %s up=%t: %w", ifname, up, err)
	}
	return nil
}

// SetCarrier takes a function's carrier away or gives it back while the
// netdev stays administratively up, as a VF's `link_state disable` or a
// pulled cable does: the veth peer (the representor) goes down or up.
func (n *Node) SetCarrier(ctx context.Context, ifname string, on bool) error {
	n.lock()
	defer n.mu.Unlock()
	representor := func(f *Function) *Netdev { return f.Representor }
	err := n.changeLink(ctx, ifname, representor, on, func(f *Function) {
		f.Representor.Up = on
		f.Netdev.OperState, f.Representor.OperState = "down", "down"
		if on {
			f.Representor.OperState = "up"
			if f.Netdev.Up {
				f.Netdev.OperState = "up"
			}
		}
	})
	if err != nil {
		return fmt.Errorf("set carrier of %s on=%t: %w", ifname, on, err)
	}
	return nil
}

// changeLink sets one link of the function whose netdev is ifname up or
// down, applies the resulting state and rewrites it into the tree.
func (n *Node) changeLink(ctx context.Context, ifname string, link func(*Function) *Netdev, up bool, apply func(*Function)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	i := slices.IndexFunc(n.st.Functions, func(f *Function) bool { return f.Netdev != nil && f.Netdev.Name == ifname })
	if i < 0 {
		return errors.New("no function has this netdev")
	}
	f := n.st.Functions[i]
	if err := n.changeLinks(func(ls *links) error { return ls.setUp(link(f).Name, up) }); err != nil {
		return err
	}
	apply(f)
	// The kernel sets a veth's operstate after the change, from its
	// link watch: the change is made once netlink says so, or a reader
	// right after it sees the state before.
	if err := n.changeLinks(func(ls *links) error { return ls.waitVethStates(ctx, f.Netdev, f.Representor) }); err != nil {
		return err
	}
	l := n.layout()
	l.writeLinkChange(f)
	if err := l.Err(); err != nil {
		return err
	}
	return n.save()
}

func (n *Node) layout() layout { return layout{newTree(n.st.Dir), n.st} }

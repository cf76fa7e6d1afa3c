package virtualnode

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/hwnet-io/hwnet/hwdb"
)

// AddSF adds the PF's SF with this sfnum, as `devlink port add pci/PF
// flavour pcisf pfnum P sfnum N` and activating its port function do: the
// auxiliary device mlx5_core.sf.<index> below the PF, its netdev up with
// its representor, and on RDMA-capable models its RDMA device. Like mlx5
// it refuses a PF not on mlx5_core, an InfiniBand port (no switchdev
// eSwitch) and an sfnum the PF has already.
func (n *Node) AddSF(ctx context.Context, pf string, sfnum int) error {
	n.lock()
	defer n.mu.Unlock()
	if err := n.announced(n.addSF(ctx, pf, sfnum)); err != nil {
		return fmt.Errorf("add SF %d to %s: %w", sfnum, pf, err)
	}
	return nil
}

func (n *Node) addSF(ctx context.Context, addr string, sfnum int) error {
	pf, err := n.function(addr)
	if err != nil {
		return err
	}
	if err := checkSFPort(pf, sfnum); err != nil {
		return err
	}
	rid, err := parseRoutingID(pf.Addr)
	if err != nil {
		return err
	}
	sf := n.st.newSF(pf, sfnum)
	pf.SFs = append(pf.SFs, sf)
	slices.SortFunc(pf.SFs, func(a, b *SF) int { return cmp.Compare(a.Num, b.Num) })
	// The new SF alone is refreshed and settled: the PF's other netdevs
	// may be in pods' netns, or down, as the admin left them.
	only := []*Function{{SFs: []*SF{sf}}}
	err = n.changeLinks(func(ls *links) error {
		if err := ls.addSFVeth(n.st, rid, sf); err != nil {
			return err
		}
		if err := ls.refresh(only); err != nil {
			return err
		}
		if err := ls.h.LinkSetUp(&netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: sf.Representor.Index}}); err != nil {
			return fmt.Errorf("set %s up: %w", sf.Representor.Name, err)
		}
		return ls.settle(ctx, only)
	})
	if err != nil {
		return err
	}
	l := n.layout()
	l.writeSF(pf, sf)
	if err := l.Err(); err != nil {
		return err
	}
	n.pending = append(n.pending, sfNetUEvent{"add", sf})
	return n.save()
}

// checkSFPort refuses an SF port mlx5 would not add.
func checkSFPort(pf *Function, sfnum int) error {
	switch {
	case pf.Driver != "mlx5_core":
		return fmt.Errorf("the PF is on %q, which adds no pcisf ports (EOPNOTSUPP)", pf.Driver)
	case pf.LinkType == hwdb.InfiniBand:
		return errors.New("an InfiniBand port has no switchdev eSwitch to add SF ports to (EOPNOTSUPP)")
	case sfnum < 0 || sfnum >= 1<<12:
		return fmt.Errorf("sfnum %d: the tree tells apart sfnums 0-4095 only", sfnum)
	case len(pf.SFs) >= maxSFsPerPF:
		return fmt.Errorf("the PF has %d SFs, the most the tree draws (ENOSPC)", len(pf.SFs))
	case slices.ContainsFunc(pf.SFs, func(sf *SF) bool { return sf.Num == sfnum }):
		return fmt.Errorf("sfnum %d: the PF has it already (EEXIST)", sfnum)
	}
	return nil
}

// DeleteSF deletes the PF's SF with this sfnum, as deactivating its port
// function and `devlink port del` do: its auxiliary devices, netdev,
// representor and RDMA device go. A netdev in another netns (a pod's) is
// left there, as the kernel would destroy it where it is.
func (n *Node) DeleteSF(ctx context.Context, pf string, sfnum int) error {
	n.lock()
	defer n.mu.Unlock()
	if err := n.announced(n.deleteSF(ctx, pf, sfnum)); err != nil {
		return fmt.Errorf("delete SF %d of %s: %w", sfnum, pf, err)
	}
	return nil
}

func (n *Node) deleteSF(ctx context.Context, addr string, sfnum int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pf, err := n.function(addr)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(pf.SFs, func(sf *SF) bool { return sf.Num == sfnum })
	if i < 0 {
		return errors.New("the PF has no such SF (ENOENT)")
	}
	sf := pf.SFs[i]
	if err := n.changeLinks(func(ls *links) error { return ls.delVeth(sf.Netdev) }); err != nil {
		return err
	}
	l := n.layout()
	l.removeSF(sf)
	if err := l.Err(); err != nil {
		return err
	}
	pf.SFs = slices.Delete(pf.SFs, i, i+1)
	n.pending = append(n.pending, sfNetUEvent{"remove", sf})
	return n.save()
}

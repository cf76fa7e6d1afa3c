package vfadmin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hwnet-io/hwnet/node/pcidriver"
)

// ErrNoPKeys marks a VF whose PF maps no partition keys through the
// host: an Ethernet VF, or an mlx5 one, whose P_Keys the subnet manager
// gives (ib-kubernetes). A VF's pKey is refused there.
var ErrNoPKeys = errors.New("its PF maps no partition keys through the host")

// ErrUnknownPKey marks a partition key the PF's physical P_Key table does
// not hold: a VF can only be mapped to a key the subnet manager gave the
// port.
var ErrUnknownPKey = errors.New("unknown pkey")

// defaultPKeyIndex is what mlx4 maps a VF's virtual P_Key index 0 to
// when it makes the VF: physical index 0. A reset without the index the
// VF had puts it back.
const defaultPKeyIndex = "0"

// unusedPKey is a P_Key table entry that holds no key.
const unusedPKey = "0x0000"

// IOV maps an InfiniBand VF's partition key in its PF's mlx4 iov tree
// under SysfsRoot (drivers/infiniband/hw/mlx4/sysfs.c), on port 1:
// iov/ports/1/pkeys/<i> is the physical P_Key table, and
// iov/<VF address>/ports/1/pkey_idx/0 the physical index the VF's
// virtual index 0, its default P_Key, maps to.
type IOV struct{ SysfsRoot string }

// PKeyTable is the physical P_Key table, entry by entry ("0x8001").
func (o IOV) PKeyTable(ctx context.Context, vf VF) ([]string, error) {
	dir, err := o.dir(ctx, vf)
	if err != nil {
		return nil, err
	}
	var table []string
	for i := 0; ; i++ {
		b, err := os.ReadFile(filepath.Join(dir, "ports/1/pkeys", strconv.Itoa(i)))
		if errors.Is(err, fs.ErrNotExist) && i > 0 {
			return table, nil
		}
		if err != nil {
			return nil, fmt.Errorf("P_Key table: %w", err)
		}
		table = append(table, strings.ToLower(strings.TrimSpace(string(b))))
	}
}

// PKeyIndex is the physical index the VF's virtual index 0 maps to, as
// the kernel shows it: a number, or "none".
func (o IOV) PKeyIndex(ctx context.Context, vf VF) (string, error) {
	dir, err := o.dir(ctx, vf)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(o.pkeyIdx0(dir, vf))
	if err != nil {
		return "", fmt.Errorf("VF %s: %w", vf.PCIAddress, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// SetPKeyIndex maps the VF's virtual index 0 to physical index idx (a
// number, or "none").
func (o IOV) SetPKeyIndex(ctx context.Context, vf VF, idx string) error {
	dir, err := o.dir(ctx, vf)
	if err != nil {
		return err
	}
	rel, err := filepath.Rel(o.SysfsRoot, o.pkeyIdx0(dir, vf))
	if err == nil {
		err = pcidriver.Sysfs{Root: o.SysfsRoot}.Write(rel, idx+"\n")
	}
	if err != nil {
		return fmt.Errorf("VF %s: pkey_idx/0 %s: %w", vf.PCIAddress, idx, err)
	}
	return nil
}

func (o IOV) pkeyIdx0(dir string, vf VF) string {
	return filepath.Join(dir, vf.PCIAddress, "ports/1/pkey_idx/0")
}

// dir is the PF's iov tree. A PF or VF that is gone took the mapping
// with it (ErrGone); a PF without the tree maps no P_Keys (ErrNoPKeys).
func (o IOV) dir(ctx context.Context, vf VF) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	res := resolver{o.SysfsRoot}
	pf := res.device(vf.PFPCIAddress)
	for _, dev := range []string{pf, res.device(vf.PCIAddress)} {
		if _, err := os.Stat(dev); errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("%s: %w", filepath.Base(dev), ErrGone)
		}
	}
	ibdevs, _ := filepath.Glob(filepath.Join(pf, "infiniband", "*", "iov"))
	if len(ibdevs) == 0 {
		drv, _ := os.Readlink(filepath.Join(pf, "driver"))
		return "", fmt.Errorf("PF %s (driver %q): %w: only mlx4 (ConnectX-3) has the iov tree; "+
			"an mlx5 VF's P_Keys come from the subnet manager (ib-kubernetes), an Ethernet VF has none", vf.PFPCIAddress, filepath.Base(drv), ErrNoPKeys)
	}
	if _, err := os.Stat(filepath.Join(ibdevs[0], vf.PCIAddress)); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("VF %s: not in its PF's iov tree: %w", vf.PCIAddress, ErrGone)
	}
	return ibdevs[0], nil
}

// pkeyIndexOf is the physical index whose entry is pkey.
func pkeyIndexOf(ctx context.Context, a Admin, vf VF, pkey string) (string, error) {
	table, err := a.PKeyTable(ctx, vf)
	if err != nil {
		return "", err
	}
	var held []string
	for i, k := range table {
		if k == pkey {
			return strconv.Itoa(i), nil
		}
		if k != unusedPKey {
			held = append(held, k)
		}
	}
	return "", fmt.Errorf("%w %s: the P_Key table of its PF %s holds %s", ErrUnknownPKey, pkey, vf.PFPCIAddress, strings.Join(held, ", "))
}

// setPKey maps the VF's virtual index 0 to the physical entry pkey.
func setPKey(ctx context.Context, a Admin, vf VF, pkey string) error {
	idx, err := pkeyIndexOf(ctx, a, vf, pkey)
	if err != nil {
		return err
	}
	return a.SetPKeyIndex(ctx, vf, idx)
}

// priorPKeyIndex is what the VF's virtual index 0 maps to now, which a
// reset writes back, once pkey is known to be one it can be given.
func priorPKeyIndex(ctx context.Context, a Admin, vf VF, pkey string) (string, error) {
	if _, err := pkeyIndexOf(ctx, a, vf, pkey); err != nil {
		return "", err
	}
	return a.PKeyIndex(ctx, vf)
}

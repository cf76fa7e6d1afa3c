package vflayout

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// ApplyError is a change that failed, and what putting the PF back did.
type ApplyError struct {
	PF  string
	Err error
	// Rollback is nil when the PF is back as it was.
	Rollback error
}

func (e *ApplyError) Error() string {
	if e.Rollback != nil {
		return fmt.Sprintf("PF %s: %v; and putting its VFs back failed: %v", e.PF, e.Err, e.Rollback)
	}
	return fmt.Sprintf("PF %s: %v; its VFs are back as they were", e.PF, e.Err)
}

func (e *ApplyError) Unwrap() error { return e.Err }

// Apply brings the PF's VFs to want. It writes nothing when they are
// already so (changed false). A change that fails is undone: the PF gets
// the VF count and bindings it had, and the error is an *ApplyError. The
// caller makes sure no VF of the PF is held.
func (s Sysfs) Apply(ctx context.Context, pf string, want Want) (changed bool, err error) {
	before, err := s.Read(pf)
	if err != nil {
		return false, err
	}
	if want.SatisfiedBy(before) {
		return false, nil
	}
	if err := s.set(ctx, pf, want); err != nil {
		// The rollback runs even when ctx ended: a PF left half way is
		// worse than a late stop.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout(s, before))
		defer cancel()
		return true, &ApplyError{PF: pf, Err: err, Rollback: s.set(rctx, pf, before.Want())}
	}
	return true, nil
}

// rollbackTimeout gives each step of a rollback its Settle.
func rollbackTimeout(s Sysfs, st State) time.Duration {
	return s.Settle * time.Duration(2+3*len(st))
}

// set writes the PF's VFs to want and checks they are so.
func (s Sysfs) set(ctx context.Context, pf string, want Want) error {
	cur, err := s.Read(pf)
	if err != nil {
		return err
	}
	if len(cur) != want.NumVFs {
		if cur, err = s.setNumVFs(ctx, pf, len(cur), want.NumVFs); err != nil {
			return err
		}
	}
	for i, vf := range cur {
		if want.fits(i, vf) {
			continue
		}
		if err := s.rebind(ctx, vf, want.Drivers[i]); err != nil {
			return fmt.Errorf("VF %d (%s): %w", i, vf.Addr, err)
		}
	}
	got, err := s.Read(pf)
	if err != nil {
		return err
	}
	if !want.SatisfiedBy(got) {
		return fmt.Errorf("VFs are %+v after the change, want %s", got, want)
	}
	return nil
}

// setNumVFs changes the PF's VF count as the kernel takes it: a PF with
// VFs refuses another non-zero count, so it goes through 0.
func (s Sysfs) setNumVFs(ctx context.Context, pf string, have, want int) (State, error) {
	attr := "bus/pci/devices/" + pf + "/sriov_numvfs"
	count := func(n int) func() (bool, error) {
		return func() (bool, error) {
			// An emulation that refuses a count writes the old one back,
			// where the kernel fails the write.
			if v, err := os.ReadFile(filepath.Join(s.Root, attr)); err == nil && strings.TrimSpace(string(v)) != strconv.Itoa(n) {
				return false, fmt.Errorf("sriov_numvfs %d refused: it reads %s", n, strings.TrimSpace(string(v)))
			}
			st, err := s.Read(pf)
			return err == nil && len(st) == n, nil
		}
	}
	if have > 0 {
		if err := s.write(attr, "0"); err != nil {
			return nil, fmt.Errorf("sriov_numvfs 0: %w", err)
		}
		if err := s.settle(ctx, "no VFs", count(0)); err != nil {
			return nil, err
		}
	}
	if want > 0 {
		if err := s.write(attr, strconv.Itoa(want)); err != nil {
			return nil, fmt.Errorf("sriov_numvfs %d: %w", want, err)
		}
		if err := s.settle(ctx, strconv.Itoa(want)+" VFs", count(want)); err != nil {
			return nil, err
		}
	}
	return s.Read(pf)
}

// rebind binds the VF to driver, or with driver "" to the kernel's
// choice: unbind, driver_override, drivers_probe.
func (s Sysfs) rebind(ctx context.Context, vf VF, driver string) error {
	dev := "bus/pci/devices/" + vf.Addr
	if vf.Driver != "" {
		if err := s.write(dev+"/driver/unbind", vf.Addr); err != nil {
			return fmt.Errorf("unbind from %s: %w", vf.Driver, err)
		}
		if err := s.settle(ctx, "unbound", func() (bool, error) { return s.driver(vf.Addr) == "", nil }); err != nil {
			return err
		}
	}
	// A newline alone clears the override.
	if err := s.write(dev+"/driver_override", driver+"\n"); err != nil {
		return fmt.Errorf("driver_override %q: %w", driver, err)
	}
	if err := s.write("bus/pci/drivers_probe", vf.Addr); err != nil {
		return fmt.Errorf("drivers_probe: %w", err)
	}
	bound := func() (bool, error) { d := s.driver(vf.Addr); return d != "" && (driver == "" || d == driver), nil }
	what := "bound to " + driver
	if driver == "" {
		what = "bound to its driver"
	}
	return s.settle(ctx, what, bound)
}

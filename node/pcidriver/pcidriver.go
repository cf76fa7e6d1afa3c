// Package pcidriver binds a PCI function to a driver through sysfs, as the
// kernel wants it done: unbind from the driver it has, write
// driver_override, write the address to drivers_probe; each write's
// effect is awaited, since an emulation enacts it a moment later and a
// driver may take time to let go. It is the one place hwnet rebinds a
// function: a PF's VF layout (package vflayout) and a claim asking for a
// driver (package dra) both go through it.
package pcidriver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultSettle is how long a sysfs write may take to show.
const DefaultSettle = 10 * time.Second

// pollInterval is how often a write's effect is looked for.
const pollInterval = 5 * time.Millisecond

// Sysfs binds functions in a sysfs tree.
type Sysfs struct {
	// Root is where sysfs is mounted, /sys on a host.
	Root string
	// Settle bounds how long a write may take to show: the kernel's are
	// done when write returns, an emulation's a moment later.
	Settle time.Duration
}

// Binding is a function's driver and driver_override.
type Binding struct {
	// Driver is the bound driver, "" when unbound.
	Driver string
	// Override is driver_override, "" when unset.
	Override string
}

func (s Sysfs) device(addr string) string { return filepath.Join(s.Root, "bus/pci/devices", addr) }

// Driver is the driver bound to the function at addr, "" for none.
func (s Sysfs) Driver(addr string) string {
	target, err := os.Readlink(filepath.Join(s.device(addr), "driver"))
	if err != nil {
		return ""
	}
	return filepath.Base(target)
}

// Read is the function's driver and driver_override.
func (s Sysfs) Read(addr string) (Binding, error) {
	b := Binding{Driver: s.Driver(addr)}
	data, err := os.ReadFile(filepath.Join(s.device(addr), "driver_override"))
	if err != nil {
		return b, err
	}
	if o := strings.TrimSpace(string(data)); o != "(null)" {
		b.Override = o
	}
	return b, nil
}

// Rebind binds the function at addr, now on driver from ("" unbound), to
// driver, or with driver "" to the kernel's choice with no override.
func (s Sysfs) Rebind(ctx context.Context, addr, from, driver string) error {
	if err := s.Unbind(ctx, addr, from); err != nil {
		return err
	}
	return s.Probe(ctx, addr, driver)
}

// Restore puts the function at addr back on was: on its driver, through
// an override naming it (which binds whatever the driver's ID table
// says), then with the override it had.
func (s Sysfs) Restore(ctx context.Context, addr string, was Binding) error {
	now, err := s.Read(addr)
	if err != nil {
		return err
	}
	if now.Driver != was.Driver {
		if err := s.Unbind(ctx, addr, now.Driver); err != nil {
			return err
		}
		if was.Driver != "" {
			if err := s.Probe(ctx, addr, was.Driver); err != nil {
				return err
			}
		}
	}
	if now, err = s.Read(addr); err != nil || now.Override == was.Override {
		return err
	}
	return s.WriteOverride(addr, was.Override)
}

// Unbind unbinds the function at addr from driver; "" means it has none.
func (s Sysfs) Unbind(ctx context.Context, addr, driver string) error {
	if driver == "" {
		return nil
	}
	if err := s.Write("bus/pci/devices/"+addr+"/driver/unbind", addr); err != nil {
		return fmt.Errorf("unbind from %s: %w", driver, err)
	}
	return s.Wait(ctx, "unbound", func() (bool, error) { return s.Driver(addr) == "", nil })
}

// Probe binds the unbound function at addr to override, or with override
// "" to the kernel's choice: driver_override, then drivers_probe.
func (s Sysfs) Probe(ctx context.Context, addr, override string) error {
	if err := s.WriteOverride(addr, override); err != nil {
		return err
	}
	if err := s.Write("bus/pci/drivers_probe", addr); err != nil {
		return fmt.Errorf("drivers_probe: %w", err)
	}
	bound := func() (bool, error) { d := s.Driver(addr); return d != "" && (override == "" || d == override), nil }
	what := "bound to " + override
	if override == "" {
		what = "bound to its driver"
	}
	return s.Wait(ctx, what, bound)
}

// WriteOverride writes the function's driver_override; "" clears it.
func (s Sysfs) WriteOverride(addr, override string) error {
	// A newline alone clears the override.
	if err := s.Write("bus/pci/devices/"+addr+"/driver_override", override+"\n"); err != nil {
		return fmt.Errorf("driver_override %q: %w", override, err)
	}
	return nil
}

// Write writes value to the attribute at rel, below Root.
func (s Sysfs) Write(rel, value string) error {
	f, err := os.OpenFile(filepath.Join(s.Root, rel), os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(value)
	return errors.Join(err, f.Close())
}

// Wait waits until cond holds, at most Settle; cond's error ends the wait
// at once.
func (s Sysfs) Wait(ctx context.Context, what string, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, s.Settle)
	defer cancel()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		done, err := cond()
		switch {
		case err != nil:
			return err
		case done:
			return nil
		}
		select {
		case <-ctx.Done():
			if done, err := cond(); done || err != nil {
				return err
			}
			return fmt.Errorf("%s: not so after %s: %w", what, s.Settle, ctx.Err())
		case <-tick.C:
		}
	}
}

package devlink

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// TestNetlinkAbsentFamilyAskedOnce: a kernel without the devlink family
// is asked once, for reads and sets alike; any other failure, which may
// pass, is asked about every time.
func TestNetlinkAbsentFamilyAskedOnce(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		calls int
	}{
		{"no family", fmt.Errorf("genl: %w", unix.ENOENT), 1},
		{"transient", unix.EBUSY, 4},
	} {
		calls := 0
		n := &Netlink{get: func(string, string) (*netlink.DevlinkDevice, error) { calls++; return nil, tt.err }}
		for range 2 {
			_, errR := n.ESwitchMode(context.Background(), "0000:3b:00.0")
			errS := n.SetESwitchMode(context.Background(), "0000:3b:00.0", ModeSwitchdev)
			if !errors.Is(errR, tt.err) || !errors.Is(errS, tt.err) {
				t.Errorf("%s: errors %v and %v, want %v", tt.name, errR, errS, tt.err)
			}
		}
		if calls != tt.calls {
			t.Errorf("%s: devlink asked %d times, want %d", tt.name, calls, tt.calls)
		}
	}
}

// TestNetlinkMode: the mode is devlink's answer for the PF.
func TestNetlinkMode(t *testing.T) {
	n := &Netlink{get: func(bus, name string) (*netlink.DevlinkDevice, error) {
		d := &netlink.DevlinkDevice{BusName: bus, DeviceName: name}
		d.Attrs.Eswitch.Mode = ModeSwitchdev
		return d, nil
	}}
	if got, err := n.ESwitchMode(context.Background(), "0000:3b:00.0"); got != ModeSwitchdev || err != nil {
		t.Errorf("got %q, %v; want switchdev", got, err)
	}
}

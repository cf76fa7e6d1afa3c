package discovery

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

// countingESwitch fails with err and counts the calls.
type countingESwitch struct {
	err   error
	calls int
}

func (c *countingESwitch) ESwitchMode(context.Context, string) (string, error) {
	c.calls++
	return "legacy", c.err
}

type countingVDPA struct {
	err   error
	calls int
}

func (c *countingVDPA) VDPADevices(context.Context) ([]ParentedVDPA, error) {
	c.calls++
	return nil, c.err
}

// TestAbsentFamilyAskedOnce: a missing netlink family is asked about once;
// any other failure, which may pass, is asked about every time.
func TestAbsentFamilyAskedOnce(t *testing.T) {
	for _, tt := range []struct {
		name  string
		err   error
		calls int
	}{
		{"no family", fmt.Errorf("devlink: %w", unix.ENOENT), 1},
		{"transient", errors.New("device busy"), 3},
		{"works", nil, 3},
	} {
		es, vd := &countingESwitch{err: tt.err}, &countingVDPA{err: tt.err}
		k, v := &kernelESwitch{devlink: es}, &kernelVDPA{vdpa: vd}
		for range 3 {
			_, errE := k.ESwitchMode(context.Background(), "0000:3b:00.0")
			_, errV := v.VDPADevices(context.Background())
			if !errors.Is(errE, tt.err) || !errors.Is(errV, tt.err) {
				t.Errorf("%s: errors %v and %v, want %v", tt.name, errE, errV, tt.err)
			}
		}
		if es.calls != tt.calls || vd.calls != tt.calls {
			t.Errorf("%s: devlink asked %d times, vDPA %d; want %d", tt.name, es.calls, vd.calls, tt.calls)
		}
	}
}

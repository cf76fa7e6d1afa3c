package discovery

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sys/unix"
)

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
		{"no family", fmt.Errorf("vdpa: %w", unix.ENOENT), 1},
		{"transient", errors.New("device busy"), 3},
		{"works", nil, 3},
	} {
		vd := &countingVDPA{err: tt.err}
		v := &kernelVDPA{vdpa: vd}
		for range 3 {
			if _, err := v.VDPADevices(context.Background()); !errors.Is(err, tt.err) {
				t.Errorf("%s: error %v, want %v", tt.name, err, tt.err)
			}
		}
		if vd.calls != tt.calls {
			t.Errorf("%s: vDPA asked %d times; want %d", tt.name, vd.calls, tt.calls)
		}
	}
}

package capture

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/hwnet-io/hwnet/api/capture"
	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// VirtualNode builds a virtual node named name that draws c's NICs:
// unpacked into a scratch directory, read by discovery as a tree of
// another machine, and drawn again by virtualnode.BuildCaptured. It
// returns what the node leaves out of the capture.
func VirtualNode(ctx context.Context, c *capture.Capture, name string, db *hwdb.DB, opts virtualnode.Options) (*virtualnode.Node, []string, error) {
	scratch, err := os.MkdirTemp("", "hwnet-capture-")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(scratch)
	if err := Unpack(c, scratch); err != nil {
		return nil, nil, err
	}
	sys := filepath.Join(scratch, "sys")
	inv, err := discovery.Discover(ctx, discovery.Options{SysfsRoot: sys, DevRoot: filepath.Join(scratch, "dev"), DB: db})
	if err != nil {
		return nil, nil, fmt.Errorf("read the capture: %w", err)
	}
	if len(inv.Problems) > 0 {
		return nil, nil, fmt.Errorf("read the capture: %w", errors.New(inv.Problems[0]))
	}
	return virtualnode.BuildCaptured(ctx, virtualnode.Captured{Name: name, Sys: sys, Inventory: inv}, opts)
}

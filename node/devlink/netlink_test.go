package devlink_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/devlink"
)

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// TestNetlinkRefusesMode: a mode the kernel does not know is refused
// before devlink is asked.
func TestNetlinkRefusesMode(t *testing.T) {
	err := devlink.NewNetlink().SetESwitchMode(context.Background(), pf0, "offload")
	if err == nil || !strings.Contains(err.Error(), `"offload"`) {
		t.Errorf("got %v, want a refusal naming the mode", err)
	}
}

// Both are ESwitches, and so discovery's readers.
var (
	_ devlink.ESwitch = (*devlink.Netlink)(nil)
	_ devlink.ESwitch = (*devlink.Record)(nil)
)

package cluster

import (
	"context"
	"os/exec"
	"testing"
	"time"

	"github.com/vishvananda/netns"

	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestTwoClustersAndAnotherNetnsUser brings two clusters up on the host
// with another user of named network namespaces (ip netns add) between
// them, tears the first down while the second runs, then the second: each
// Down leaves nothing, and the other netns stays usable (issue 12 item 7).
// Two clusters take half a minute and twice the memory of one.
func TestTwoClustersAndAnotherNetnsUser(t *testing.T) {
	vnodetest.RequireRoot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	images := testImages(ctx, t)
	first := upForTest(ctx, t, "two-clusters-a", images)
	runPod(ctx, t, first, testClient(t, first))
	const foreign = "hwnet-two-clusters-other"
	if out, err := exec.Command("ip", "netns", "add", foreign).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", foreign, err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", foreign).Run() })
	second := upForTest(ctx, t, "two-clusters-b", images)
	runPod(ctx, t, second, testClient(t, second))
	checkNothingLeftAfterDown(ctx, t, first)
	checkNothingLeftAfterDown(ctx, t, second)
	ns, err := netns.GetFromName(foreign)
	if err != nil {
		t.Fatalf("the other user's netns %s after both clusters went: %v", foreign, err)
	}
	ns.Close()
}

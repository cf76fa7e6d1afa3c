package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// reconcileWait covers the agent's reconcile interval (deploy/'s default,
// a minute) and the teardown itself.
const reconcileWait = 3 * time.Minute

// TestReconcileTearsDownSandboxesTheRuntimeForgot: an attachment whose
// sandbox the runtime no longer has (it dropped it after a failed or
// interrupted ADD or DEL, and containerd never calls CNI GC) is torn down
// by the agent itself within one reconcile period: its veth, IP lease and
// record go, and the node is back at its baseline (issue 12 item 3).
func TestReconcileTearsDownSandboxesTheRuntimeForgot(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	before := e.mustSnapshot(ctx, t)
	const sandbox = "forgotten-sandbox-0123456789"
	netns := "hwnet-e2e-forgotten"
	if _, err := Exec(ctx, e.c, nil, "ip", "netns", "add", netns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Exec(context.Background(), e.c, nil, "ip", "netns", "del", netns) })
	e.shimADD(ctx, t, sandbox, "/var/run/netns/"+netns)
	record := hwnetCacheDir + "/containers/" + sandbox + ".json"
	// As old as a sandbox the runtime would long have listed.
	if _, err := Exec(ctx, e.c, nil, "touch", "-d", "-10 minutes", record); err != nil {
		t.Fatal(err)
	}
	err := cluster.Poll(ctx, reconcileWait, "the agent tearing down "+sandbox, func(ctx context.Context) error {
		if _, err := Exec(ctx, e.c, nil, "test", "-e", record); err == nil {
			return fmt.Errorf("record %s still there", record)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	e.checkNoLeaks(ctx, t, before, false)
}

// shimADD runs the hwnet shim's ADD inside the cluster as the runtime
// would, with hwnet's configuration, for a container the runtime does not
// have.
func (e *env) shimADD(ctx context.Context, t *testing.T, containerID, netnsPath string) {
	t.Helper()
	data, err := Exec(ctx, e.c, nil, "cat", ConfFile)
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := libcni.InjectConf(list.Plugins[0], map[string]any{"name": list.Name, "cniVersion": list.CNIVersion})
	if err != nil {
		t.Fatal(err)
	}
	cmd := e.c.Command(ctx, cniBinDir+"/hwnet")
	cmd.Env = append(cmd.Env, "CNI_COMMAND=ADD", "CNI_CONTAINERID="+containerID, "CNI_NETNS="+netnsPath,
		"CNI_IFNAME=eth0", "CNI_PATH="+cniBinDir)
	cmd.Stdin = strings.NewReader(string(conf.Bytes))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hwnet shim ADD: %v: %s", err, out)
	}
	t.Cleanup(func() {
		del := e.c.Command(context.Background(), cniBinDir+"/hwnet")
		del.Env = append(del.Env, "CNI_COMMAND=DEL", "CNI_CONTAINERID="+containerID, "CNI_NETNS="+netnsPath,
			"CNI_IFNAME=eth0", "CNI_PATH="+cniBinDir)
		del.Stdin = strings.NewReader(string(conf.Bytes))
		del.Run()
	})
}

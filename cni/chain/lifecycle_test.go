package chain_test

import (
	"context"
	"errors"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"

	"github.com/hwnet-io/hwnet/cni/chain"
)

// lifecycleLists add, to the lists every command runs, the 1.1.0 cases
// STATUS and GC treat apart.
var lifecycleLists = append(lists[:len(lists):len(lists)],
	struct{ name, conf string }{"1.1.0 GC disabled", `{"cniVersion":"1.1.0","name":"j","disableGC":true,"plugins":[{"type":"sriov"},{"type":"tuning"}]}`},
	struct{ name, conf string }{"1.1.0 three plugins, own runtimeConfig", `{"cniVersion":"1.1.0","name":"k","plugins":[{"type":"sriov","runtimeConfig":{"kept":1}},{"type":"tuning"},{"type":"bandwidth","capabilities":{"bandwidth":true}}]}`},
)

// TestSpec1_1_StatusAndGCAsLibcni runs STATUS and GC through Chain and
// through libcni: every plugin must get the same stdin (the list's name
// and cniVersion; for GC the valid attachments under both keys libcni
// writes) and the same CNI_ variables, and neither runs for lists older
// than 1.1.0 (CNI spec 1.1 sections "STATUS" and "GC"), nor GC for a list
// that disables it.
func TestSpec1_1_StatusAndGCAsLibcni(t *testing.T) {
	valid := []types.GCAttachment{{ContainerID: "c0ffee", IfName: "net1"}, {ContainerID: "beef", IfName: "eth0"}}
	for _, tc := range lifecycleLists {
		t.Run(tc.name, func(t *testing.T) {
			exec := &recordingExec{}
			ctx := context.Background()
			ch := chain.New(exec, []string{"/opt/cni/bin"}, nil)
			lib := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, t.TempDir(), exec)
			list, llist := parse(t, tc.conf), libcniList(t, tc.conf)

			if err := ch.Status(ctx, list); err != nil {
				t.Fatal(err)
			}
			chainStatus := exec.take()
			if err := lib.GetStatusNetworkList(ctx, llist); err != nil {
				t.Fatal(err)
			}
			compareCalls(t, "STATUS", chainStatus, exec.take())

			if err := ch.GC(ctx, list, valid); err != nil {
				t.Fatal(err)
			}
			chainGC := exec.take()
			if err := lib.GCNetworkList(ctx, llist, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
				t.Fatal(err)
			}
			compareCalls(t, "GC", chainGC, exec.take())
			runs := list.CNIVersion == "1.1.0"
			if got := len(chainStatus) > 0; got != runs {
				t.Errorf("STATUS of version %s ran: %v", list.CNIVersion, got)
			}
			if got := len(chainGC) > 0; got != (runs && !list.DisableGC) {
				t.Errorf("GC of version %s, disableGC %v, ran: %v", list.CNIVersion, list.DisableGC, got)
			}
		})
	}
}

// TestStatusStopsAtFailureGCDoesNot: STATUS reports the first failing
// plugin and runs no further, as libcni does; GC runs every plugin and
// reports each failure.
func TestStatusStopsAtFailureGCDoesNot(t *testing.T) {
	const conf = `{"cniVersion":"1.1.0","name":"l","plugins":[{"type":"sriov"},{"type":"tuning"},{"type":"bandwidth"}]}`
	exec := &recordingExec{fail: "tuning"}
	ch := chain.New(exec, nil, nil)
	list := parse(t, conf)
	ctx := context.Background()
	err := ch.Status(ctx, list)
	if err == nil || len(exec.take()) != 2 {
		t.Errorf("STATUS: error %v; want the tuning plugin's, bandwidth not run", err)
	}
	var cniErr *types.Error
	if !errors.As(err, &cniErr) || cniErr.Code != 7 {
		t.Errorf("STATUS error %v: want the plugin's CNI error code 7 kept", err)
	}
	if err := ch.GC(ctx, list, nil); err == nil || len(exec.take()) != 3 {
		t.Errorf("GC: error %v; want the tuning plugin's after all three ran", err)
	}
}

package chain_test

import (
	"context"
	"os"
	"testing"

	"github.com/containernetworking/cni/libcni"

	"github.com/hwnet-io/hwnet/cni/chain"
)

// BenchmarkEngineAddDel is one attachment's ADD and DEL of a two-plugin
// list (an SR-IOV VF with tuning, CNI 1.0.0), through Chain and through
// libcni, with plugins answering in process: what is left is the engine's
// own cost, which the agent pays on every attachment of every pod on top
// of the plugins' processes. docs/cni.md relates it to the whole ADD a
// runtime sees (make bench-peers).
func BenchmarkEngineAddDel(b *testing.B) {
	const conf = `{"cniVersion":"1.0.0","name":"sriov-net","plugins":[{"type":"sriov","vlan":100,"spoofchk":"on","capabilities":{"mac":true,"ips":true},"ipam":{"type":"static"}},{"type":"tuning","capabilities":{"mac":true},"sysctl":{"net.ipv6.conf.all.disable_ipv6":"1"}}]}`
	ctx := context.Background()
	b.Run("chain", func(b *testing.B) {
		exec := &recordingExec{}
		ch := chain.New(exec, []string{"/opt/cni/bin"}, os.Environ())
		list := parse(b, conf)
		rt, _ := runtime()
		for b.Loop() {
			added, _, err := ch.Add(ctx, list, rt)
			if err == nil {
				err = ch.Del(ctx, list, rt, added)
			}
			if err != nil {
				b.Fatal(err)
			}
			exec.take()
		}
	})
	b.Run("libcni", func(b *testing.B) {
		exec := &recordingExec{}
		lib := libcni.NewCNIConfigWithCacheDir([]string{"/opt/cni/bin"}, b.TempDir(), exec)
		list := libcniList(b, conf)
		_, rt := runtime()
		for b.Loop() {
			_, err := lib.AddNetworkList(ctx, list, rt)
			if err == nil {
				err = lib.DelNetworkList(ctx, list, rt)
			}
			if err != nil {
				b.Fatal(err)
			}
			exec.take()
		}
	})
}

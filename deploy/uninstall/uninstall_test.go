package uninstall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/hwnet-io/hwnet/api/agentrestart"
	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/cni/daemon"
	"github.com/hwnet-io/hwnet/cni/server"
	"github.com/hwnet-io/hwnet/cni/wire"
	"github.com/hwnet-io/hwnet/internal/nodesocket"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

type refuseAll struct{}

func (refuseAll) Handle(context.Context, *wire.Request) (json.RawMessage, error) { return nil, nil }

// heldVF is a VF of the pool a running pod holds: its device-info file
// stays.
const heldVF = "0000:3b:02.1"

// uninstallNode is a node's hwnet files in a temp dir, as a stopped agent
// leaves them, one file of another device plugin and the one of a VF a
// running pod holds, which kubelet's PodResources API serves; and CDI
// specs: one of a pool with cdi naming free VFs, one naming the held VF,
// and one of another vendor.
func uninstallNode(t *testing.T) (Options, []string, []string) {
	t.Helper()
	dir := t.TempDir()
	kubelet, err := testkubelet.ServePodResources(filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubelet.Close)
	kubelet.SetPod("default", "cnf", "intel.com/sriov_net", heldVF)
	o := Options{PodResourcesSocket: filepath.Join(dir, "kubelet.sock"), DRAPluginsDir: filepath.Join(dir, "plugins"), ConfigFile: filepath.Join(dir, "config.yaml"), PluginDir: filepath.Join(dir, "dp"),
		DevinfoDir: filepath.Join(dir, "devinfo-dp"), LastGoodConfig: filepath.Join(dir, "last-good"), FenceDir: filepath.Join(dir, "fences"),
		CDIDir: filepath.Join(dir, "cdi"),
		CNI: &daemon.Options{ConfDir: filepath.Join(dir, "net.d"), BinDir: filepath.Join(dir, "bin"),
			SocketPath: filepath.Join(dir, "run", "cni.sock"), CacheDir: filepath.Join(dir, "cache"),
			DevinfoDir: filepath.Join(dir, "devinfo-cni"), NetworkAPISocket: filepath.Join(dir, "run", "cri-network.sock"),
			NetworkDir: filepath.Join(dir, "networks")}}
	if err := os.MkdirAll(o.DRAPluginsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(o.ConfigFile, []byte("resourceList:\n  - resourceName: sriov_net\n    selectors: {drivers: [iavf]}\n"), 0o644)
	info := devinfo.NewPCI(devinfo.PCI{PCIAddress: "0000:3b:02.0"})
	for _, f := range []struct{ res, id string }{{"intel.com/sriov_net", "0000:3b:02.0"}, {"example.com/other", "0000:3b:02.0"}, {"intel.com/sriov_net", heldVF}} {
		if err := devinfo.Write(o.DevinfoDir, f.res, f.id, info); err != nil {
			t.Fatal(err)
		}
	}
	cniInfo := filepath.Join(o.CNI.DevinfoDir, devinfo.CNIFileName("default/net1", "c1", "net1"))
	if err := devinfo.WriteFile(cniInfo, info); err != nil {
		t.Fatal(err)
	}
	rec := &attachment.Record{ContainerID: "c1", Attachments: []attachment.Attachment{{Network: "default/net1", IfName: "net1",
		ConfList: json.RawMessage(`{}`), DeviceInfoFile: cniInfo}}}
	if err := attachments.NewStore(o.CNI.CacheDir).Save(rec); err != nil {
		t.Fatal(err)
	}
	conf, shim := filepath.Join(o.CNI.ConfDir, daemon.DefaultConfFileName), filepath.Join(o.CNI.BinDir, "hwnet")
	poolSocket := filepath.Join(o.PluginDir, "intel.com_sriov_net.sock")
	network := filepath.Join(o.CNI.NetworkDir, "default_net-a.json")
	fence := filepath.Join(o.FenceDir, "vf-layout_0000_3b_00.0.json")
	notice := agentrestart.Path(o.CNI.SocketPath)
	for _, p := range []string{conf, shim, poolSocket, o.CNI.SocketPath, notice, o.LastGoodConfig, o.CNI.NetworkAPISocket, network, fence} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, nil, 0o644)
	}
	freeSpec, heldSpec, otherSpec := filepath.Join(o.CDIDir, "hwnet-dp-intel.com_dpdk.json"),
		filepath.Join(o.CDIDir, "hwnet-dp-intel.com_sriov_net.json"), filepath.Join(o.CDIDir, "vendor.json")
	writeCDISpec(t, freeSpec, "0000:3b:02.6", "0000:3b:02.7")
	writeCDISpec(t, heldSpec, "0000:3b:02.0", heldVF)
	writeCDISpec(t, otherSpec, heldVF)
	want := []string{conf, shim, o.CNI.SocketPath, notice, poolSocket, filepath.Join(o.DevinfoDir, devinfo.FileName("intel.com/sriov_net", "0000:3b:02.0")),
		o.LastGoodConfig, o.FenceDir, o.CNI.NetworkAPISocket, o.CNI.NetworkDir, cniInfo, o.CNI.CacheDir, freeSpec}
	kept := []string{filepath.Join(o.DevinfoDir, devinfo.FileName("example.com/other", "0000:3b:02.0")),
		filepath.Join(o.DevinfoDir, devinfo.FileName("intel.com/sriov_net", heldVF)), heldSpec, otherSpec}
	return o, want, kept
}

// TestRemove: after it, the runtime finds no hwnet configuration or
// shim and nothing of hwnet's is left but the device-info file and the
// CDI spec of a VF a running pod holds; another plugin's files stay.
func TestRemove(t *testing.T) {
	o, want, kept := uninstallNode(t)
	removed, err := Remove(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q\nwant    %q", removed, want)
	}
	for _, p := range want {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s left on the node", p)
		}
	}
	for _, p := range kept {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v; want it kept (another plugin's, or a held VF's)", p, err)
		}
	}
	if again, err := Remove(context.Background(), o); err != nil || len(again) != 0 {
		t.Errorf("second Uninstall: removed %q, %v; want nothing to do", again, err)
	}
	o.ConfigFile = filepath.Join(t.TempDir(), "ConfigMap-deleted.yaml")
	if _, err := Remove(context.Background(), o); err != nil {
		t.Errorf("Uninstall without the pool configuration: %v", err)
	}
}

// TestRemoveWaitsForDelWithoutAgent: a shim running DEL without the
// agent holds its container's lock and may still write a VF's pending
// reset into the records' directory; Remove waits for it, removing
// nothing meanwhile, so the directory does not come back after it.
func TestRemoveWaitsForDelWithoutAgent(t *testing.T) {
	o, want, _ := uninstallNode(t)
	unlock, err := attachments.NewStore(o.CNI.CacheDir).Lock(context.Background(), "c1")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if removed, err := Remove(ctx, o); !errors.Is(err, context.DeadlineExceeded) || len(removed) > 0 {
		t.Errorf("Remove while a DEL held its container = removed %q, %v; want nothing removed until the context's deadline", removed, err)
	}
	for _, p := range want {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed while a DEL was under way: %v", p, err)
		}
	}
	unlock()
	if _, err := Remove(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(o.CNI.CacheDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the records' directory after Remove: %v", err)
	}
}

// TestRemoveRefusedWhileAgentRuns: a running agent would write its
// configuration again, so nothing is removed.
func TestRemoveRefusedWhileAgentRuns(t *testing.T) {
	o, want, _ := uninstallNode(t)
	os.Remove(o.CNI.SocketPath)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- server.New(refuseAll{}, nil, nodesocket.Access{}).Serve(ctx, o.CNI.SocketPath) }()
	for deadline := time.Now().Add(10 * time.Second); daemon.Answers(ctx, o.CNI.SocketPath) != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the CNI server never answered")
		}
	}
	if _, err := Remove(ctx, o); err == nil {
		t.Fatal("Uninstall went ahead while hwnet-agent answered")
	}
	if _, err := os.Stat(want[0]); err != nil {
		t.Errorf("hwnet's CNI configuration removed although refused: %v", err)
	}
	cancel()
	<-done
}

// writeCheckpoint writes an hwnet DRA checkpoint of the driver named
// driver under the plugins directory, with one claim on device, torn when
// asked (its hwnet marker kept).
func writeCheckpoint(t *testing.T, pluginsDir, driver, device string, torn bool) {
	t.Helper()
	cp := checkpoint.New()
	cp.Claims[types.UID("uid-c")] = &checkpoint.Claim{Namespace: "default", Name: "c",
		Devices: []checkpoint.Device{{Request: "vf", Resource: "intel.com/sriov_net", PCIAddress: device}}}
	data, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	if torn {
		data = data[:len(data)-10]
	}
	path := filepath.Join(pluginsDir, driver, "checkpoint.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRemoveKeepsDevinfoOfClaims: a claim any hwnet DRA checkpoint under
// kubelet's plugins directory records, whatever its driver's name, holds
// its device: the device-info file stays, while DRA is off.
func TestRemoveKeepsDevinfoOfClaims(t *testing.T) {
	o, want, kept := uninstallNode(t)
	claimed := filepath.Join(o.DevinfoDir, devinfo.FileName("intel.com/sriov_net", "0000:3b:02.0"))
	writeCheckpoint(t, o.DRAPluginsDir, "net.example.com", "0000:3b:02.0", false)
	removed, err := Remove(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	want = slices.DeleteFunc(want, func(p string) bool { return p == claimed })
	slices.Sort(removed)
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %q\nwant    %q", removed, want)
	}
	for _, p := range append(kept, claimed) {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s removed: %v; want it kept", p, err)
		}
	}
}

// TestRemoveKeepsDevinfoWithSourceUnknown: while a source of holders
// cannot be read (kubelet gone, an hwnet checkpoint torn in any driver's
// directory), no pool's device-info file is removed, the log says why,
// and the rest goes.
func TestRemoveKeepsDevinfoWithSourceUnknown(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, o *Options)
		inLog string
	}{
		{"kubelet gone", func(t *testing.T, o *Options) {
			o.PodResourcesSocket = filepath.Join(t.TempDir(), "no-kubelet.sock")
		}, "no-kubelet.sock"},
		{"torn checkpoint", func(t *testing.T, o *Options) {
			writeCheckpoint(t, o.DRAPluginsDir, "other.example.com", "0000:3b:03.0", true)
		}, filepath.Join("other.example.com", "checkpoint.json")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, want, _ := uninstallNode(t)
			tc.spoil(t, &o)
			var log bytes.Buffer
			o.Logger = slog.New(slog.NewTextHandler(&log, nil))
			removed, err := Remove(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			poolFile := filepath.Join(o.DevinfoDir, devinfo.FileName("intel.com/sriov_net", "0000:3b:02.0"))
			spec := filepath.Join(o.CDIDir, "hwnet-dp-intel.com_dpdk.json")
			if slices.Contains(removed, poolFile) || slices.Contains(removed, spec) || len(removed) != len(want)-2 {
				t.Errorf("removed %q; want everything but the pool's device-info files and CDI specs", removed)
			}
			if !strings.Contains(log.String(), "device-info files left in place") || !strings.Contains(log.String(), tc.inLog) {
				t.Errorf("log %q; want it to say the files stay because of %s", log.String(), tc.inLog)
			}
		})
	}
}

// writeCDISpec writes a CDI spec naming the devices.
func writeCDISpec(t *testing.T, path string, devices ...string) {
	t.Helper()
	spec := cdispec.Spec{Version: "0.5.0", Kind: "intel.com/x"}
	for _, d := range devices {
		spec.Devices = append(spec.Devices, cdispec.Device{Name: d, ContainerEdits: cdispec.ContainerEdits{Env: []string{"A=" + d}}})
	}
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

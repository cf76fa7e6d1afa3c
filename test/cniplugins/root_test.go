package cniplugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/containernetworking/cni/libcni"
	types100 "github.com/containernetworking/cni/pkg/types/100"
	"github.com/hwnet-io/hwnet/internal/osthread"
	"github.com/hwnet-io/hwnet/test/netnstest"
	"github.com/hwnet-io/hwnet/test/vnodetest"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// addNetns adds the test's network namespace of role; its path.
func addNetns(t *testing.T, role string) string {
	return netnstest.Add(t, fmt.Sprintf("hwnet-cniplugins-%d-%s", os.Getpid(), role))
}

func ip(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.CommandContext(t.Context(), "ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %v: %v: %s", args, err, out)
	}
}

// cnitool runs Dir's cnitool with the networks in netDir.
func cnitool(t *testing.T, dir, netDir string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(dir, "cnitool"), args...)
	cmd.Env = append(os.Environ(), "CNI_PATH="+dir, "NETCONFPATH="+netDir, "CNI_IFNAME=net1",
		`CAP_ARGS={"mac":"02:23:45:67:89:01"}`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("cnitool %v: %v: %s", args, err, out)
	}
	return out
}

// cnitool needs a real netns path, and keeps its results in /var/lib/cni.
func TestCnitoolDrivesRecorder(t *testing.T) {
	vnodetest.RequireRoot(t)
	h := newHarness(t)
	podNetns := addNetns(t, "cnitool")
	conf := h.recorder("sriov", "0000:3b:02.0")
	conf.Capabilities = map[string]bool{"mac": true}
	network := fmt.Sprintf("hwnet-cniplugins-%d", os.Getpid())
	data, err := json.Marshal(confList{CNIVersion: "1.1.0", Name: network, Plugins: []any{conf}})
	if err != nil {
		t.Fatal(err)
	}
	netDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(netDir, "10-recorder.conflist"), data, 0o644); err != nil {
		t.Fatal(err)
	}

	out := cnitool(t, h.dir, netDir, "add", network, podNetns)
	var result types100.Result
	if err := json.Unmarshal(out, &result); err != nil || len(result.Interfaces) != 1 {
		t.Fatalf("cnitool add printed %s (%v), want a result with the VF", out, err)
	}
	if got := result.Interfaces[0]; got.Mac != "02:23:45:67:89:01" || got.Sandbox != podNetns {
		t.Errorf("interface %+v, want CAP_ARGS's mac in %s", got, podNetns)
	}
	cnitool(t, h.dir, netDir, "check", network, podNetns)
	cnitool(t, h.dir, netDir, "del", network, podNetns)

	records := ReadRecords(t, h.recordFile())
	if got := commands(records); got != "ADD,CHECK,DEL" {
		t.Errorf("cnitool ran %q, want ADD,CHECK,DEL", got)
	}
	if records[0].Env["CNI_NETNS"] != podNetns {
		t.Errorf("CNI_NETNS %q, want %s", records[0].Env["CNI_NETNS"], podNetns)
	}
	if files := h.stateFiles(t); len(files) != 0 {
		t.Errorf("state after cnitool del: %v", files)
	}
}

type hostDeviceConf struct {
	Type   string `json:"type"`
	Device string `json:"device"`
}

// host-device from Dir moves a veth into a pod netns and back. It runs in a
// "host" netns of its own so that nothing touches the machine's links.
func TestHostDeviceMovesLinkAndBack(t *testing.T) {
	vnodetest.RequireRoot(t)
	dir := Dir(t)
	hostNetns, podNetns := addNetns(t, "host"), addNetns(t, "pod")
	const device = "hwcp0"
	ip(t, "-n", filepath.Base(hostNetns), "link", "add", device, "type", "veth", "peer", "name", device+"p")
	mac := linkMAC(t, hostNetns, device)

	cni := newCNIConfig(dir, t.TempDir())
	list := newList(t, "1.0.0", hostDeviceConf{Type: "host-device", Device: device})
	rt := &libcni.RuntimeConf{ContainerID: "hostdev", NetNS: podNetns, IfName: "net1"}
	inNetns(t, hostNetns, func() error {
		_, err := cni.AddNetworkList(t.Context(), list, rt)
		return err
	})
	if got := linkMAC(t, podNetns, "net1"); got != mac {
		t.Errorf("pod's net1 has mac %s, want the moved %s's %s", got, device, mac)
	}
	if linkExists(t, hostNetns, device) {
		t.Errorf("%s still in the host netns after ADD", device)
	}
	inNetns(t, hostNetns, func() error { return cni.DelNetworkList(t.Context(), list, rt) })
	if got := linkMAC(t, hostNetns, device); got != mac {
		t.Errorf("%s back in the host netns with mac %s, want %s", device, got, mac)
	}
	if linkExists(t, podNetns, "net1") {
		t.Error("net1 still in the pod netns after DEL")
	}
}

// inNetns runs fn, and the plugins it starts, in the netns at path, on a
// thread of its own (see osthread.Run).
func inNetns(t *testing.T, path string, fn func() error) {
	t.Helper()
	err := osthread.Run(func() error {
		target, err := netns.GetFromPath(path)
		if err != nil {
			return err
		}
		err = netns.Set(target)
		target.Close()
		if err != nil {
			return err
		}
		return fn()
	})
	if err != nil {
		t.Fatalf("in %s: %v", path, err)
	}
}

func linkHandle(t *testing.T, path string) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

func linkMAC(t *testing.T, path, name string) string {
	t.Helper()
	link, err := linkHandle(t, path).LinkByName(name)
	if err != nil {
		t.Fatalf("%s in %s: %v", name, path, err)
	}
	return net.HardwareAddr(link.Attrs().HardwareAddr).String()
}

func linkExists(t *testing.T, path, name string) bool {
	t.Helper()
	_, err := linkHandle(t, path).LinkByName(name)
	var notFound netlink.LinkNotFoundError
	if err != nil && !errors.As(err, &notFound) {
		t.Fatalf("%s in %s: %v", name, path, err)
	}
	return err == nil
}

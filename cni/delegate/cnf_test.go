package delegate

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/hwnet-io/hwnet/test/cniplugins"
)

func kubernetesClient(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

const (
	sriovNAD = `{"cniVersion":"1.0.0","plugins":[
  {"type":"host-device","capabilities":{"ips":true},"ipam":{"type":"static"}},
  {"type":"tuning","capabilities":{"mac":true}}]}`
	dpdkNAD = `{"cniVersion":"0.4.0","name":"dpdk","type":"host-device"}`
)

func ibNAD(state, record string) string {
	return `{"cniVersion":"0.4.0","name":"ib-net","type":"hwnet-test-plugin","personality":"ib-sriov",
  "capabilities":{"infinibandGUID":true},"stateDir":"` + state + `","recordFile":"` + record + `"}`
}

// checkNoReadOneWrite: since the counter's reset the ADD read nothing of
// the API server and wrote its status with one PATCH.
func checkNoReadOneWrite(t *testing.T, n *testNode) {
	t.Helper()
	reqs := n.counter.Snapshot()
	for key, count := range reqs {
		if strings.HasPrefix(key, "GET ") || strings.HasPrefix(key, "LIST ") {
			t.Errorf("ADD read the API server: %s x%d (%v)", key, count, reqs)
		}
	}
	if reqs["PATCH pods"] != 1 {
		t.Errorf("ADD wrote its status %d times, want one PATCH: %v", reqs["PATCH pods"], reqs)
	}
}

// The CNF pod: two SR-IOV attachments on one resource, one DPDK
// attachment and one InfiniBand attachment in another namespace. It must get
// exactly the devices kubelet allocated, each where the annotation put it,
// and network-status must say so (NPWG 4.1, 4.2, 5.3, 6.2; device-info 1.1.0).
func TestSpec4_2_CNFPodGetsItsAllocatedDevices(t *testing.T) {
	n := newTestNode(t, "cnf-pod")
	state, record := t.TempDir(), filepath.Join(t.TempDir(), "records.jsonl")
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	n.createNAD(podNS, "dpdk", dpdkRes, dpdkNAD)
	n.createNAD(otherNS, "ib-net", ibRes, ibNAD(state, record))

	iavf := n.vfs("iavf", "0000:3b:00.0")
	vfio := n.vfs("vfio-pci", "0000:3b:00.0")
	ib := n.vfs("mlx5_core", "0000:41:00.0")
	// Kubelet reports devices in no particular order; hwnet sorts them.
	sriovIDs := []string{iavf[3].Addr, iavf[1].Addr}
	pod := n.createPod("cnf", `[
  {"name":"sriov-a","ips":["10.56.0.10/24"],"mac":"02:00:00:00:aa:01"},
  {"name":"sriov-a","interface":"data1","ips":["10.56.0.11/24"]},
  {"name":"dpdk"},
  {"name":"ib-net","namespace":"other-ns","infiniband-guid":"00:11:22:33:44:55:66:77"}]`,
		map[string][]string{sriovRes: sriovIDs, dpdkRes: {vfio[0].Addr}, ibRes: {ib[1].Addr}})
	podNetns := n.podNetns("hwnet-cnf-pod")
	ctx := context.Background()
	waitPod(t, n, podNS, "cnf")
	n.counter.Reset()

	out, err := n.call(ctx, "ADD", "cnf-sandbox", podNetns, pod)
	if err != nil {
		t.Fatalf("ADD: %v", err)
	}
	var res struct {
		CNIVersion string                     `json:"cniVersion"`
		IPs        []struct{ Address string } `json:"ips"`
	}
	if err := json.Unmarshal(out, &res); err != nil || res.CNIVersion != "1.0.0" || len(res.IPs) == 0 ||
		!strings.HasPrefix(res.IPs[0].Address, "10.244.0.") {
		t.Fatalf("ADD result is not the default network's in hwnet's version: %s (%v)", out, err)
	}

	links := linksIn(t, podNetns)
	for _, want := range []string{"eth0", "net1", "data1"} {
		if _, ok := links[want]; !ok {
			t.Fatalf("pod netns links %v lack %s", names(links), want)
		}
	}
	if mac := links["net1"].Attrs().HardwareAddr.String(); mac != "02:00:00:00:aa:01" {
		t.Errorf("net1 mac = %s, want the annotation's 02:00:00:00:aa:01 (4.1.2.1.4)", mac)
	}
	// The lower PCI address goes to the first attachment (package doc).
	first, second := iavf[1], iavf[3]
	if got := addrsOf(t, podNetns, "net1"); !slices.Equal(got, []string{"10.56.0.10/24"}) {
		t.Errorf("net1 addresses = %v (4.1.2.1.3)", got)
	}
	if got := addrsOf(t, podNetns, "data1"); !slices.Equal(got, []string{"10.56.0.11/24"}) {
		t.Errorf("data1 addresses = %v", got)
	}
	if links["data1"].Attrs().HardwareAddr.String() != second.Netdev.Address {
		t.Errorf("data1 is not %s's netdev %s", second.Addr, second.Netdev.Name)
	}

	list := networkStatus(t, n, "cnf")
	want := []struct{ name, iface, pci string }{
		{"podnet", "eth0", ""},
		{"cnf/sriov-a", "net1", first.Addr},
		{"cnf/sriov-a", "data1", second.Addr},
		{"cnf/dpdk", "net2", vfio[0].Addr},
		{"other-ns/ib-net", "net3", ib[1].Addr},
	}
	if len(list) != len(want) {
		t.Fatalf("network-status has %d entries, want %d: %+v", len(list), len(want), list)
	}
	for i, w := range want {
		st := list[i]
		if st.Name != w.name || st.Interface != w.iface || st.Default != (i == 0) {
			t.Errorf("network-status[%d] = %s on %s default=%v, want %s on %s (5.2, 5.3.1, 5.3.2)", i, st.Name, st.Interface, st.Default, w.name, w.iface)
		}
		if w.pci == "" {
			continue
		}
		if st.DeviceInfo == nil || st.DeviceInfo.PCI == nil || st.DeviceInfo.PCI.PCIAddress != w.pci {
			t.Errorf("network-status[%d] device-info = %+v, want pci-address %s", i, st.DeviceInfo, w.pci)
		}
	}
	if len(list[0].DefaultRoute) != 1 || list[0].DefaultRoute[0] != "10.244.0.1" {
		t.Errorf("default network default-route = %v, want [10.244.0.1] (5.3.6.4)", list[0].DefaultRoute)
	}
	if !slices.Equal(list[1].IPs, []string{"10.56.0.10/24"}) || list[1].MAC != "02:00:00:00:aa:01" {
		t.Errorf("net1 status ips/mac = %v %s (5.3.3, 5.3.4)", list[1].IPs, list[1].MAC)
	}
	ibMAC := list[4].MAC
	if len(strings.Split(ibMAC, ":")) != 20 || !strings.HasSuffix(ibMAC, "00:11:22:33:44:55:66:77") {
		t.Errorf("IB status mac = %q, want the plugin's 20-byte address ending in the GUID (5.3.4)", ibMAC)
	}
	checkIBPluginInput(t, record, ib[1].Addr)

	checkNoReadOneWrite(t, n)

	if _, err := n.call(ctx, "CHECK", "cnf-sandbox", podNetns, pod); err != nil {
		t.Errorf("CHECK after ADD: %v", err)
	}
	for range 2 { // DEL twice is fine (CNI spec DEL idempotence)
		if _, err := n.call(ctx, "DEL", "cnf-sandbox", podNetns, pod); err != nil {
			t.Fatalf("DEL: %v", err)
		}
	}
	checkPrevResult(t, record)
	n.assertNothingLeft(podNetns, state)
}

// checkPrevResult asserts the ib plugin's CHECK and DEL got its ADD's
// result as prevResult, 20-byte address included (CNI spec 1.0 sections
// 3.2 and 3.3: from 0.4.0 on, DEL and CHECK carry the ADD's result).
func checkPrevResult(t *testing.T, record string) {
	t.Helper()
	macs := map[string]string{}
	for _, r := range cniplugins.ReadRecords(t, record) {
		var in struct {
			Prev struct {
				Interfaces []struct{ Mac string } `json:"interfaces"`
			} `json:"prevResult"`
		}
		if r.Command == "ADD" || json.Unmarshal(r.Stdin, &in) != nil {
			continue
		}
		if len(in.Prev.Interfaces) > 0 {
			macs[r.Command] = in.Prev.Interfaces[0].Mac
		}
	}
	const ipoib = 20*3 - 1 // 20 bytes as hex pairs with colons
	if len(macs["CHECK"]) != ipoib || macs["DEL"] != macs["CHECK"] {
		t.Errorf("ib plugin prevResult addresses %v; want CHECK and DEL to get the ADD's 20-byte address", macs)
	}
}

// checkIBPluginInput asserts the ib-sriov-like plugin got the device at the
// top level and the GUID in runtimeConfig, as ib-sriov-cni reads them.
func checkIBPluginInput(t *testing.T, record, deviceID string) {
	t.Helper()
	for _, r := range cniplugins.ReadRecords(t, record) {
		if r.Command != "ADD" {
			continue
		}
		var in struct {
			DeviceID      string `json:"deviceID"`
			DevInfo       string `json:"CNIDeviceInfoFile"`
			RuntimeConfig struct {
				GUID string `json:"infinibandGUID"`
			} `json:"runtimeConfig"`
		}
		json.Unmarshal(r.Stdin, &in)
		if in.DeviceID != deviceID || in.RuntimeConfig.GUID != "00:11:22:33:44:55:66:77" || in.DevInfo == "" {
			t.Errorf("ib plugin got deviceID %q guid %q devinfo %q; want %s and the annotation's GUID", in.DeviceID, in.RuntimeConfig.GUID, in.DevInfo, deviceID)
		}
		return
	}
	t.Error("ib plugin recorded no ADD")
}

// assertNothingLeft checks a DEL gave everything back: VF netdevs to the
// node, no record, no CNI device-info file, no plugin state.
func (n *testNode) assertNothingLeft(podNetns, state string) {
	t := n.t
	t.Helper()
	if links := linksIn(t, podNetns); len(links) > 1 {
		t.Errorf("pod netns still holds %v", names(links))
	}
	nodeLinks := linksIn(t, "/var/run/netns/"+n.node.NetnsName())
	for _, f := range n.node.Devices() {
		if f.Netdev != nil && f.PF != "" {
			if _, ok := nodeLinks[f.Netdev.Name]; !ok {
				t.Errorf("VF %s netdev %s did not come back to the node", f.Addr, f.Netdev.Name)
			}
		}
	}
	for _, dir := range []string{filepath.Join(n.dir, "cache", "containers"), filepath.Join(n.dir, "devinfo", "cni"), state} {
		if entries, _ := os.ReadDir(dir); len(entries) > 0 {
			t.Errorf("%s still holds %d entries, first %s", dir, len(entries), entries[0].Name())
		}
	}
}

// "default-route" on a secondary attachment moves the pod's default route
// there: the default network's goes, the gateway is set on the chosen
// interface, and status reports it on that entry only (NPWG 4.1.2.1.9,
// 5.3.6.4).
func TestSpec4_1_2_1_9_DefaultRouteMoves(t *testing.T) {
	n := newTestNode(t, "cni-defroute")
	n.createNAD(podNS, "sriov-a", sriovRes, sriovNAD)
	iavf := n.vfs("iavf", "0000:3e:00.0")
	pod := n.createPod("routed", `[{"name":"sriov-a","ips":["10.56.0.40/24"],"default-route":["10.56.0.1"]}]`,
		map[string][]string{sriovRes: {iavf[5].Addr}})
	podNetns := n.podNetns("hwnet-defroute")
	waitPod(t, n, podNS, "routed")
	ctx := context.Background()
	if _, err := n.call(ctx, "ADD", "routed", podNetns, pod); err != nil {
		t.Fatalf("ADD: %v", err)
	}
	routes := defaultRoutes(t, podNetns)
	if len(routes) != 1 || routes[0] != "net1 via 10.56.0.1" {
		t.Errorf("pod default routes = %v, want only net1 via 10.56.0.1", routes)
	}
	list := networkStatus(t, n, "routed")
	if len(list) != 2 || len(list[0].DefaultRoute) != 0 || !slices.Equal(list[1].DefaultRoute, []string{"10.56.0.1"}) {
		t.Errorf("network-status default-route = %v / %v, want none on the default network and 10.56.0.1 on net1",
			list[0].DefaultRoute, list[len(list)-1].DefaultRoute)
	}
	if _, err := n.call(ctx, "DEL", "routed", podNetns, pod); err != nil {
		t.Fatal(err)
	}
	n.assertNothingLeft(podNetns, t.TempDir())
}

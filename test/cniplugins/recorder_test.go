package cniplugins

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

// cniVersions are all the CNI versions libcni speaks; hwnet must work with
// every one.
func cniVersions() []string {
	return version.All.SupportedVersions()
}

func TestRecorderSRIOVWithoutDeviceIDFails(t *testing.T) {
	for _, v := range cniVersions() {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			for _, personality := range []string{"sriov", "ib-sriov"} {
				_, err := h.cni.AddNetworkList(t.Context(), newList(t, v, h.recorder(personality, "")), attachment("nodevice"))
				if err == nil {
					t.Fatalf("%s ADD without deviceID succeeded", personality)
				}
				msg := cniError(t, err).Msg
				if !strings.Contains(msg, "VF pci addr is required") || !strings.Contains(msg, `"deviceID"`) {
					t.Errorf("%s ADD without deviceID: %q, want sriov-cni's error naming \"deviceID\"", personality, msg)
				}
			}
			if got := commands(ReadRecords(t, h.recordFile())); got != "ADD,ADD" {
				t.Errorf("recorded %q, want the two rejected ADDs", got)
			}
			if files := h.stateFiles(t); len(files) != 0 {
				t.Errorf("rejected ADDs left state %v", files)
			}
		})
	}
}

func TestRecorderRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		edit func(*recorderConf)
		want string
	}{
		{"personality", func(c *recorderConf) { c.Personality = "sriovv" }, `"personality" is "sriovv"`},
		{"failOn", func(c *recorderConf) { c.FailOn = []string{"add"} }, `"failOn" names "add"`},
		{"deviceID", func(c *recorderConf) { c.DeviceID = "3b:02.0" }, `"deviceID" is "3b:02.0"`},
	}
	h := newHarness(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conf := h.recorder("sriov", "0000:3b:02.0")
			tt.edit(&conf)
			_, err := h.cni.AddNetworkList(t.Context(), newList(t, "1.0.0", conf), attachment("bad"))
			if err == nil || !strings.Contains(cniError(t, err).Msg, tt.want) {
				t.Errorf("ADD: %v, want an error containing %s", err, tt.want)
			}
		})
	}
}

func TestSpec4_1_2_1_4_2_SRIOVUsesRuntimeConfigMAC(t *testing.T) {
	const mac = "02:23:45:67:89:01"
	for _, v := range cniVersions() {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			conf := h.recorder("sriov", "0000:3b:02.0")
			conf.Capabilities = map[string]bool{"mac": true}
			rt := attachment("withmac")
			rt.CapabilityArgs = map[string]any{"mac": mac}
			result := h.add(t, newList(t, v, conf), rt)

			var stdin struct {
				RuntimeConfig struct{ MAC string } `json:"runtimeConfig"`
			}
			records := ReadRecords(t, h.recordFile())
			if err := json.Unmarshal(records[0].Stdin, &stdin); err != nil || stdin.RuntimeConfig.MAC != mac {
				t.Errorf("plugin received runtimeConfig mac %q (%v), want %s", stdin.RuntimeConfig.MAC, err, mac)
			}
			if !hasInterfaces(t, v) {
				return
			}
			if len(result.Interfaces) != 1 {
				t.Fatalf("result has interfaces %v, want the one VF", result.Interfaces)
			}
			got := result.Interfaces[0]
			if got.Name != rt.IfName || got.Sandbox != rt.NetNS || got.Mac != mac {
				t.Errorf("interface %+v, want %s in %s with mac %s", got, rt.IfName, rt.NetNS, mac)
			}
		})
	}
}

// Without a "mac" capability argument sriov-cni reports the VF's own
// address; the recorder's stands in for it, stable per deviceID.
func TestRecorderSRIOVDefaultMAC(t *testing.T) {
	h := newHarness(t)
	list := newList(t, "1.0.0", h.recorder("sriov", "0000:3b:02.0"))
	first := h.add(t, list, attachment("first"))
	second := h.add(t, list, attachment("second"))
	other := h.add(t, newList(t, "1.0.0", h.recorder("sriov", "0000:3b:02.1")), attachment("third"))

	mac, err := net.ParseMAC(first.Interfaces[0].Mac)
	if err != nil || len(mac) != 6 {
		t.Fatalf("default mac %q: want a 6-byte MAC (%v)", first.Interfaces[0].Mac, err)
	}
	if mac[0]&0x01 != 0 || mac[0]&0x02 == 0 {
		t.Errorf("default mac %s is not a locally administered unicast address", mac)
	}
	if second.Interfaces[0].Mac != mac.String() {
		t.Errorf("same deviceID gave macs %s and %s", mac, second.Interfaces[0].Mac)
	}
	if other.Interfaces[0].Mac == mac.String() {
		t.Errorf("deviceIDs 0000:3b:02.0 and 0000:3b:02.1 share mac %s", mac)
	}
}

func TestSpec4_1_2_1_4_IBSRIOVReturns20ByteAddress(t *testing.T) {
	const guid = "c2:11:22:33:44:55:66:77"
	for _, v := range cniVersions() {
		if !hasInterfaces(t, v) {
			continue // a 0.1.0 or 0.2.0 result cannot carry the address
		}
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			conf := h.recorder("ib-sriov", "0000:41:00.2")
			conf.Capabilities = map[string]bool{"infinibandGUID": true}
			rt := attachment("ib")
			rt.CapabilityArgs = map[string]any{"infinibandGUID": guid}
			result := h.add(t, newList(t, v, conf), rt)

			mac := result.Interfaces[0].Mac
			addr, err := net.ParseMAC(mac)
			if err != nil || len(addr) != 20 {
				t.Fatalf("mac %q: want a 20-byte IPoIB address (%v)", mac, err)
			}
			if !strings.HasPrefix(mac, "00:00:") || mac[12:] != "fe:80:00:00:00:00:00:00:"+guid {
				t.Errorf("mac %s, want 00:00:xx:xx:fe:80:00:00:00:00:00:00:%s", mac, guid)
			}
		})
	}
}

func TestRecorderIBSRIOVDefaultGUID(t *testing.T) {
	h := newHarness(t)
	result := h.add(t, newList(t, "1.1.0", h.recorder("ib-sriov", "0000:41:00.2")), attachment("ib"))
	addr, err := net.ParseMAC(result.Interfaces[0].Mac)
	if err != nil || len(addr) != 20 || addr[4] != 0xfe || addr[5] != 0x80 {
		t.Errorf("mac %q (%v): want a 20-byte IPoIB address in fe80::/64", result.Interfaces[0].Mac, err)
	}
}

func TestRecorderIPAMAddressOnSandboxInterface(t *testing.T) {
	for _, v := range cniVersions() {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			conf := h.recorder("sriov", "0000:3b:02.0")
			conf.IPAM = h.hostLocal()
			list := newList(t, v, conf)
			rt := attachment("ipam")
			result := h.add(t, list, rt)

			if len(result.IPs) != 1 || !result.IPs[0].Address.IP.Equal(net.ParseIP("192.0.2.2")) {
				t.Fatalf("result IPs %v, want host-local's first address 192.0.2.2", result.IPs)
			}
			if hasInterfaces(t, v) && (result.IPs[0].Interface == nil || *result.IPs[0].Interface != 0) {
				t.Errorf("IP %v is not on interface 0, the sandbox interface", result.IPs[0])
			}
			// host-local keeps one file per allocated address.
			lease := filepath.Join(h.tmp, "ipam", "hwnet-test", "192.0.2.2")
			if _, err := os.Stat(lease); err != nil {
				t.Fatalf("host-local holds no lease after ADD: %v", err)
			}
			if err := h.cni.DelNetworkList(t.Context(), list, rt); err != nil {
				t.Fatalf("DEL: %v", err)
			}
			if _, err := os.Stat(lease); !os.IsNotExist(err) {
				t.Errorf("lease after DEL: %v, want it released through the delegated DEL", err)
			}
		})
	}
}

// The CNI spec's configuration lists: a plugin after the first receives
// prevResult and passes it on.
func TestRecorderPassesPrevResultThrough(t *testing.T) {
	for _, v := range cniVersions() {
		if !hasInterfaces(t, v) {
			continue // 0.1.0 and 0.2.0 have no prevResult
		}
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			vf := h.recorder("sriov", "0000:3b:02.0")
			vf.IPAM = h.hostLocal()
			plain := h.recorder("plain", "")
			result := h.add(t, newList(t, v, vf, plain), attachment("chain"))
			if len(result.Interfaces) != 1 || len(result.IPs) != 1 || result.IPs[0].Interface == nil || *result.IPs[0].Interface != 0 {
				t.Errorf("plain after sriov returned %v, want sriov's interface and address unchanged", result)
			}

			h2 := newHarness(t)
			ipam := h2.recorder("plain", "")
			ipam.IPAM = h2.hostLocal()
			result = h2.add(t, newList(t, v, ipam, h2.recorder("ib-sriov", "0000:41:00.2")), attachment("chain"))
			if len(result.IPs) != 1 || len(result.Interfaces) != 1 || len(result.Interfaces[0].Mac) != 59 {
				t.Errorf("ib-sriov after plain returned %v, want the address plus its IPoIB interface", result)
			}
		})
	}
}

func TestRecorderRecordsEnvAndStdin(t *testing.T) {
	for _, v := range cniVersions() {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			list := newList(t, v, h.recorder("sriov", "0000:3b:02.0"))
			rt := attachment("rec")
			rt.Args = [][2]string{{"K8S_POD_NAME", "web-0"}}
			h.add(t, list, rt)
			if err := h.cni.DelNetworkList(t.Context(), list, rt); err != nil {
				t.Fatal(err)
			}
			records := ReadRecords(t, h.recordFile())
			if got := commands(records); got != "ADD,DEL" {
				t.Fatalf("recorded %q, want ADD,DEL", got)
			}
			add := records[0]
			want := map[string]string{
				"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "rec", "CNI_NETNS": absentNetns,
				"CNI_IFNAME": "net1", "CNI_ARGS": "K8S_POD_NAME=web-0", "CNI_PATH": h.dir,
			}
			for k, val := range want {
				if add.Env[k] != val {
					t.Errorf("recorded %s=%q, want %q", k, add.Env[k], val)
				}
			}
			var stdin struct {
				CNIVersion string `json:"cniVersion"`
				Name       string `json:"name"`
				DeviceID   string `json:"deviceID"`
			}
			if err := json.Unmarshal(add.Stdin, &stdin); err != nil {
				t.Fatalf("recorded stdin %s is not the JSON config: %v", add.Stdin, err)
			}
			if stdin.CNIVersion != v || stdin.Name != "hwnet-test" || stdin.DeviceID != "0000:3b:02.0" {
				t.Errorf("recorded stdin %s, want the config libcni sent", add.Stdin)
			}
			if add.Time.IsZero() || records[1].Time.Before(add.Time) {
				t.Errorf("record times %v, %v: want set and in order", add.Time, records[1].Time)
			}
		})
	}
}

// Parallel plugins append to one record file; no line may be torn.
func TestRecorderParallelRecordsStayWhole(t *testing.T) {
	const n = 24
	h := newHarness(t)
	list := newList(t, "1.1.0", h.recorder("sriov", "0000:3b:02.0"))
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			_, err := h.cni.AddNetworkList(t.Context(), list, attachment(fmt.Sprintf("par%d", i)))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	records := ReadRecords(t, h.recordFile())
	ids := map[string]bool{}
	for _, r := range records {
		ids[r.Env["CNI_CONTAINERID"]] = true
	}
	if len(records) != n || len(ids) != n {
		t.Errorf("%d records for %d containers, want %d of each", len(records), len(ids), n)
	}
}

func TestRecorderStateLifecycle(t *testing.T) {
	for _, v := range cniVersions() {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			list := newList(t, v, h.recorder("sriov", "0000:3b:02.0"))
			rt := attachment("state")
			h.add(t, list, rt)
			data, err := os.ReadFile(filepath.Join(h.stateDir(), "state-net1"))
			if err != nil || string(data) != "0000:3b:02.0" {
				t.Fatalf("state after ADD: %q, %v; want state-net1 holding the deviceID", data, err)
			}
			canCheck := atLeast(t, v, "0.4.0")
			if canCheck {
				if err := h.cni.CheckNetworkList(t.Context(), list, rt); err != nil {
					t.Errorf("CHECK after ADD: %v", err)
				}
			}
			for i := range 2 { // a second DEL must succeed too
				if err := h.cni.DelNetworkList(t.Context(), list, rt); err != nil {
					t.Fatalf("DEL %d: %v", i+1, err)
				}
			}
			if files := h.stateFiles(t); len(files) != 0 {
				t.Errorf("state after DEL: %v", files)
			}
			if canCheck {
				h.add(t, list, rt)
				os.Remove(filepath.Join(h.stateDir(), "state-net1"))
				if err := h.cni.CheckNetworkList(t.Context(), list, rt); err == nil {
					t.Error("CHECK succeeded with the attachment's state gone")
				}
			}
		})
	}
}

// CHECK compares prevResult with what ADD would return now.
func TestRecorderCheckCatchesChangedMAC(t *testing.T) {
	h := newHarness(t)
	conf := h.recorder("sriov", "0000:3b:02.0")
	conf.Capabilities = map[string]bool{"mac": true}
	list := newList(t, "1.0.0", conf)
	rt := attachment("check")
	rt.CapabilityArgs = map[string]any{"mac": "02:00:00:00:00:01"}
	h.add(t, list, rt)
	rt.CapabilityArgs = map[string]any{"mac": "02:00:00:00:00:02"}
	err := h.cni.CheckNetworkList(t.Context(), list, rt)
	if err == nil || !strings.Contains(err.Error(), "02:00:00:00:00:01") {
		t.Errorf("CHECK with another mac: %v, want a mismatch naming the attached one", err)
	}
}

func TestRecorderFailOn(t *testing.T) {
	tests := []struct {
		command string
		run     func(h *harness, t *testing.T, list *libcni.NetworkConfigList) error
	}{
		{"ADD", func(h *harness, t *testing.T, list *libcni.NetworkConfigList) error {
			_, err := h.cni.AddNetworkList(t.Context(), list, attachment("fail"))
			return err
		}},
		{"DEL", func(h *harness, t *testing.T, list *libcni.NetworkConfigList) error {
			return h.cni.DelNetworkList(t.Context(), list, attachment("fail"))
		}},
		{"STATUS", func(h *harness, t *testing.T, list *libcni.NetworkConfigList) error {
			return h.cni.GetStatusNetworkList(t.Context(), list)
		}},
		{"GC", func(h *harness, t *testing.T, list *libcni.NetworkConfigList) error {
			return h.cni.GCNetworkList(t.Context(), list, &libcni.GCArgs{})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			h := newHarness(t)
			conf := h.recorder("sriov", "0000:3b:02.0")
			conf.FailOn = []string{tt.command}
			err := tt.run(h, t, newList(t, "1.1.0", conf))
			if err == nil {
				t.Fatalf("%s succeeded with failOn %s", tt.command, tt.command)
			}
			cniErr := cniError(t, err)
			if cniErr.Code != types.ErrInternal || cniErr.Msg != "injected failure: "+tt.command {
				t.Errorf("error %+v, want code 999 %q", cniErr, "injected failure: "+tt.command)
			}
			if got := commands(ReadRecords(t, h.recordFile())); got != tt.command {
				t.Errorf("recorded %q, want the failed %s", got, tt.command)
			}
		})
	}
}

func TestRecorderFailOnAddEveryVersion(t *testing.T) {
	for _, v := range cniVersions() {
		t.Run(v, func(t *testing.T) {
			h := newHarness(t)
			conf := h.recorder("plain", "")
			conf.FailOn = []string{"ADD"}
			_, err := h.cni.AddNetworkList(t.Context(), newList(t, v, conf), attachment("fail"))
			if err == nil || cniError(t, err).Code != 999 {
				t.Errorf("ADD with failOn ADD: %v, want CNI error code 999", err)
			}
			if files := h.stateFiles(t); len(files) != 0 {
				t.Errorf("failed ADD left state %v", files)
			}
		})
	}
}

func TestRecorderGCRemovesStaleState(t *testing.T) {
	h := newHarness(t)
	list := newList(t, "1.1.0", h.recorder("sriov", "0000:3b:02.0"))
	h.add(t, list, attachment("live"))
	// An attachment whose DEL was lost along with the runtime's cache.
	if err := os.WriteFile(filepath.Join(h.stateDir(), "gone-net1"), []byte("0000:3b:02.1"), 0o644); err != nil {
		t.Fatal(err)
	}
	valid := []types.GCAttachment{{ContainerID: "live", IfName: "net1"}}
	if err := h.cni.GCNetworkList(t.Context(), list, &libcni.GCArgs{ValidAttachments: valid}); err != nil {
		t.Fatalf("GC: %v", err)
	}
	if files := h.stateFiles(t); !slices.Equal(files, []string{"live-net1"}) {
		t.Errorf("state after GC: %v, want only live-net1", files)
	}
	if err := h.cni.GetStatusNetworkList(t.Context(), list); err != nil {
		t.Errorf("STATUS: %v", err)
	}
}

// BenchmarkRecorderAddDel is one attach and detach through libcni with the
// sriov personality, recording and keeping state: the floor of what a
// delegation to a VF plugin costs.
func BenchmarkRecorderAddDel(b *testing.B) {
	dir := Dir(b)
	tmp := b.TempDir()
	cni := newCNIConfig(dir, b.TempDir())
	conf := recorderConf{Type: Recorder, Personality: "sriov", DeviceID: "0000:3b:02.0",
		RecordFile: filepath.Join(tmp, "records.jsonl"), StateDir: filepath.Join(tmp, "state")}
	data, err := json.Marshal(confList{CNIVersion: "1.1.0", Name: "bench", Plugins: []any{conf}})
	if err != nil {
		b.Fatal(err)
	}
	list, err := libcni.NetworkConfFromBytes(data)
	if err != nil {
		b.Fatal(err)
	}
	rt := attachment("bench")
	for b.Loop() {
		if _, err := cni.AddNetworkList(b.Context(), list, rt); err != nil {
			b.Fatal(err)
		}
		if err := cni.DelNetworkList(b.Context(), list, rt); err != nil {
			b.Fatal(err)
		}
	}
}

package ctl_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/cni/attachments"
	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// The holds of heldNode: the times each source gives.
var (
	podSince    = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	recordSince = time.Date(2025, 1, 2, 3, 4, 6, 0, time.UTC)
	claimSince  = time.Date(2025, 1, 2, 3, 0, 0, 0, time.UTC)
)

const sandboxID = "1a2b3c4d5e6f7a8b9c0d"

// heldNode is the default virtual node under poolConfig with a holder of
// each kind, from the real sources: pod default/cnf holds 0000:3b:01.5
// through the device plugin (kubelet's PodResources, its device-info
// file) and its sandbox attached it (a CNI record); claim default/x holds
// 0000:3b:01.6 (the DRA checkpoint) and 0000:3b:01.1 of a device plugin
// pool, as after a switch from DRA; pod default/old holds 0000:3e:01.0,
// in no pool, as a resource of an older config. 0000:3b:01.3 lost its
// carrier. It returns the devices command's arguments.
func heldNode(t *testing.T) []string {
	t.Helper()
	node := treeNode(t)
	if err := node.SetCarrier(t.Context(), "enp59s0f0v3", false); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	podres, err := testkubelet.ServePodResources(filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(podres.Close)
	podres.SetPod("default", "cnf", "intel.com/netdev", "0000:3b:01.5")
	podres.SetPod("default", "old", "intel.com/old", "0000:3e:01.0")
	devinfoDir := filepath.Join(dir, "devinfo")
	touch(t, filepath.Join(devinfoDir, devinfo.FileName("intel.com/netdev", "0000:3b:01.5")), []byte("{}"), podSince)
	cacheDir := filepath.Join(dir, "cni")
	err = attachments.NewStore(cacheDir).Save(&attachment.Record{ContainerID: sandboxID, PodNamespace: "default", PodName: "cnf",
		Attachments: []attachment.Attachment{{Network: "default/sriov", IfName: "net1", ConfList: json.RawMessage(`{}`),
			DeviceID: "0000:3b:01.5", Resource: "intel.com/netdev"}}})
	if err != nil {
		t.Fatal(err)
	}
	touch(t, filepath.Join(cacheDir, "containers", sandboxID+".json"), nil, recordSince)
	cp := checkpoint.New()
	cp.Claims[types.UID("uid-x")] = &checkpoint.Claim{Namespace: "default", Name: "x", Prepared: claimSince,
		Devices: []checkpoint.Device{{Request: "vf", Device: "vf-3b-01-6", Resource: "intel.com/dpdk", PCIAddress: "0000:3b:01.6"},
			{Request: "vf", Device: "vf-3b-01-1", Resource: "intel.com/low", PCIAddress: "0000:3b:01.1"}}}
	data, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	cpFile := filepath.Join(dir, "dra", "checkpoint.json")
	touch(t, cpFile, data, time.Now())
	pluginsDir := filepath.Join(dir, "plugins")
	if err := os.Mkdir(pluginsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	return []string{"devices", "--sysfs", node.SysRoot(), "--dev", node.DevRoot(), "--config", writeConfig(t, "pools.yaml", poolConfig),
		"--pod-resources-socket", filepath.Join(dir, "kubelet.sock"), "--devinfo-dir", devinfoDir,
		"--dra-plugins-dir", pluginsDir, "--dra-checkpoint", cpFile, "--cni-cache-dir", cacheDir, "--fence-dir", filepath.Join(dir, "fences")}
}

// flagValue is the value args give flag.
func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	i := slices.Index(args, flag)
	if i < 0 || i+1 == len(args) {
		t.Fatalf("no %s in %q", flag, args)
	}
	return args[i+1]
}

// touch writes data to path, unless nil, and sets its modification time.
func touch(t *testing.T, path string, data []byte, mod time.Time) {
	t.Helper()
	if data != nil {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chtimes(path, mod, mod); err != nil {
		t.Fatal(err)
	}
}

// cells splits a table row into its cells: tabwriter pads with two spaces
// at least, and no cell has two in a row.
func cells(line string) []string {
	return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
}

// TestDevicesTable: each device's pool, mode, health, holders and since
// when, from the real sources; pooled and held devices only without --all.
func TestDevicesTable(t *testing.T) {
	args := heldNode(t)
	rows := map[string]string{
		"0000:3b:01.0": "intel.com/low|devicePlugin|healthy|-|none|-",
		"0000:3b:01.3": "intel.com/netdev|devicePlugin|unhealthy: link enp59s0f0v3 is up but has no carrier|-|none|-",
		"0000:3b:01.5": "intel.com/netdev|devicePlugin|healthy|-|container 1a2b3c4d5e6f of pod default/cnf; pod default/cnf (main)|2025-01-02T03:04:05Z",
		"0000:3b:01.6": "intel.com/dpdk|dra|healthy|-|claim default/x|2025-01-02T03:00:00Z",
		"0000:3b:01.1": "intel.com/low|devicePlugin|not offered: held by claim default/x|-|claim default/x|2025-01-02T03:00:00Z",
		"0000:3e:01.0": "-|-|healthy|-|pod default/old (main, as intel.com/old)|-",
		"0000:3b:00.0": "-|-|healthy|-|none|-",
	}
	for _, tc := range []struct {
		name   string
		all    bool
		absent []string
	}{
		{name: "pooled and held", absent: []string{"0000:3b:00.0", "0000:3e:01.1", "0000:43:00.0"}},
		{name: "all", all: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := args
			if tc.all {
				a = append(a[:len(a):len(a)], "--all")
			}
			code, out, errOut := run(t, a...)
			if code != 0 || errOut != "" {
				t.Fatalf("exit %d, stderr %q", code, errOut)
			}
			got, order := deviceRows(t, out)
			for addr, want := range rows {
				if addr == "0000:3b:00.0" && !tc.all {
					continue
				}
				if got[addr] != want {
					t.Errorf("%s: %q, want %q", addr, got[addr], want)
				}
			}
			for _, addr := range tc.absent {
				if _, ok := got[addr]; ok {
					t.Errorf("%s listed: %q", addr, got[addr])
				}
			}
			if !slices.IsSorted(order) || len(got) != len(order) {
				t.Errorf("rows not sorted by PCI address, or one listed twice: %v", order)
			}
			if n := len(order); tc.all && n != 24 {
				t.Errorf("--all lists %d devices, want the node's 24 functions", n)
			}
		})
	}
}

// deviceRows are the table's rows by device, their cells after the
// first joined by "|", and the devices in the table's order.
func deviceRows(t *testing.T, out string) (map[string]string, []string) {
	t.Helper()
	rows := map[string]string{}
	var order []string
	for i, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		c := cells(line)
		if i == 0 {
			if strings.Join(c, " ") != "DEVICE POOL MODE HEALTH FENCED HOLDER SINCE" {
				t.Errorf("heading %q", line)
			}
			continue
		}
		rows[c[0]], order = strings.Join(c[1:], "|"), append(order, c[0])
	}
	return rows, order
}

// listedDevices is what scripts read of `devices -o json`.
type listedDevices struct {
	Devices []listedDevice `json:"devices"`
}

type listedDevice struct {
	Device  string         `json:"device"`
	Pool    string         `json:"pool"`
	Mode    string         `json:"mode"`
	Healthy bool           `json:"healthy"`
	Reason  string         `json:"reason"`
	Holders []listedHolder `json:"holders"`
}

type listedHolder struct {
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Container string    `json:"container"`
	Resource  string    `json:"resource"`
	Since     time.Time `json:"since"`
}

// TestDevicesMachineOutput: json and yaml give each device its holders
// as a list, each with its kind, names and since.
func TestDevicesMachineOutput(t *testing.T) {
	args := heldNode(t)
	want := map[string]listedDevice{
		"0000:3b:01.5": {Device: "0000:3b:01.5", Pool: "intel.com/netdev", Mode: "devicePlugin", Healthy: true, Holders: []listedHolder{
			{Kind: "container", Namespace: "default", Name: "cnf", Container: sandboxID, Resource: "intel.com/netdev", Since: recordSince},
			{Kind: "pod", Namespace: "default", Name: "cnf", Container: "main", Resource: "intel.com/netdev", Since: podSince}}},
		"0000:3b:01.6": {Device: "0000:3b:01.6", Pool: "intel.com/dpdk", Mode: "dra", Healthy: true, Holders: []listedHolder{
			{Kind: "claim", Namespace: "default", Name: "x", Resource: "intel.com/dpdk", Since: claimSince}}},
		"0000:3b:01.3": {Device: "0000:3b:01.3", Pool: "intel.com/netdev", Mode: "devicePlugin",
			Reason: "link enp59s0f0v3 is up but has no carrier", Holders: []listedHolder{}},
		"0000:3e:01.0": {Device: "0000:3e:01.0", Healthy: true, Holders: []listedHolder{
			{Kind: "pod", Namespace: "default", Name: "old", Container: "main", Resource: "intel.com/old"}}},
	}
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			data := []byte(mustRun(t, append(args, "-o", format)...))
			if format == "yaml" {
				var err error
				if data, err = yaml.YAMLToJSON(data); err != nil {
					t.Fatal(err)
				}
			}
			var listed listedDevices
			if err := json.Unmarshal(data, &listed); err != nil {
				t.Fatalf("%v: %s", err, data)
			}
			got := map[string]listedDevice{}
			for _, d := range listed.Devices {
				got[d.Device] = d
			}
			for addr, w := range want {
				if !reflect.DeepEqual(got[addr], w) {
					t.Errorf("%s: %+v\nwant %+v", addr, got[addr], w)
				}
			}
		})
	}
}

// TestDevicesMissingSources: a source that is not there is no error: a
// warning names it and why, the devices are listed without its holds, and
// each says its holders are unknown, from which source and why.
func TestDevicesMissingSources(t *testing.T) {
	args := heldNode(t)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		flag, source string
	}{
		{"--pod-resources-socket", "kubelet PodResources"},
		{"--dra-plugins-dir", "DRA checkpoint"},
		{"--dra-checkpoint", "DRA checkpoint"},
		{"--cni-cache-dir", "CNI attachment records"},
	} {
		t.Run(tc.flag, func(t *testing.T) {
			value := missing
			if tc.flag == "--dra-checkpoint" {
				value = filepath.Join(missing, "checkpoint.json") // its directory says whether the driver runs
			}
			why := tc.flag + ": " + missing + ": no such file or directory"
			listed, errOut := listFenced(t, append(args, tc.flag, value)...)
			if want := "holders from " + tc.source + " unknown: " + why; strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, want) {
				t.Errorf("stderr %q; want one line %q", errOut, want)
			}
			if len(listed.UnknownSources) != 1 {
				t.Errorf("unknownSources %q, want the missing source", listed.UnknownSources)
			}
			for _, d := range listed.Devices {
				if want := "who holds it is unknown: " + tc.source + ": " + why; d.Unknown != want {
					t.Errorf("%s: unknown %q, want %q", d.Device, d.Unknown, want)
				}
			}
		})
	}
}

// TestDevicesUsage: -h shows the flags; mistakes exit 2 naming the flag
// and value, failures 1.
func TestDevicesUsage(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		code     int
		inStderr string
	}{
		{[]string{"devices", "-h"}, 0, "usage: hwnetctl devices [flags]"},
		{[]string{"devices", "-o", "xml"}, 2, `-o: unknown output format "xml" (want table, json or yaml)`},
		{[]string{"devices", "--all=maybe"}, 2, `invalid boolean value "maybe" for -all`},
		{[]string{"devices", "--bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"devices", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"devices", "--config", "/nonexistent.json"}, 1, "--config: open /nonexistent.json"},
	} {
		code, _, errOut := run(t, tc.args...)
		if code != tc.code || !strings.Contains(errOut, tc.inStderr) {
			t.Errorf("hwnetctl %q: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut, tc.code, tc.inStderr)
		}
	}
}

// TestDevicesMlx4Ports: each port of an mlx4 function is a device of its
// own, listed once with the pool its port's netdev put it in, a held one
// too.
func TestDevicesMlx4Ports(t *testing.T) {
	node, config := mlx4Node(t)
	dir := t.TempDir()
	podres, err := testkubelet.ServePodResources(filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(podres.Close)
	podres.SetPod("default", "ib", "intel.com/second", "0000:3b:00.0:p1")
	none := filepath.Join(dir, "none")
	_, out, _ := run(t, "devices", "--sysfs", node.SysRoot(), "--dev", node.DevRoot(), "--config", config, "-o", "json",
		"--pod-resources-socket", filepath.Join(dir, "kubelet.sock"), "--devinfo-dir", none,
		"--dra-plugins-dir", none, "--cni-cache-dir", none, "--fence-dir", none)
	var listed listedDevices
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	var got []string
	for _, d := range listed.Devices {
		got = append(got, d.Device+" "+d.Pool+" "+strconv.Itoa(len(d.Holders)))
	}
	if want := []string{"0000:3b:00.0:p0 intel.com/first 0", "0000:3b:00.0:p1 intel.com/second 1"}; !slices.Equal(got, want) {
		t.Errorf("devices %q, want %q", got, want)
	}
}

// pfOf is the PCI address of the PF of the function at addr under the
// node's sysfs, "" when it is no VF.
func pfOf(t *testing.T, sysRoot, addr string) string {
	t.Helper()
	target, err := os.Readlink(filepath.Join(sysRoot, "bus/pci/devices", ledger.FunctionOf(addr), "physfn"))
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Base(target)
}

// fencedDevices is what scripts read of `devices -o json` about fences
// and unknown holders.
type fencedDevices struct {
	Devices []struct {
		Device  string         `json:"device"`
		Fenced  string         `json:"fenced"`
		Unknown string         `json:"unknown"`
		Holders []listedHolder `json:"holders"`
	} `json:"devices"`
	UnknownSources []string `json:"unknownSources"`
}

func listFenced(t *testing.T, args ...string) (fencedDevices, string) {
	t.Helper()
	code, out, errOut := run(t, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	var listed fencedDevices
	if err := json.Unmarshal([]byte(out), &listed); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return listed, errOut
}

// TestDevicesFenced: a PF whose VF layout is changing has its fence in
// the agent's fence directory; the PF and each of its VFs show it fenced,
// with the reason, and no other device; a fence file that cannot be read
// leaves every device's fence unknown.
func TestDevicesFenced(t *testing.T) {
	args := heldNode(t)
	sysRoot, fenceDir := flagValue(t, args, "--sysfs"), flagValue(t, args, "--fence-dir")
	const pf, reason = "0000:3b:00.0", "its VF layout is changing to 4 VFs"
	data, err := fenceapi.Encode(&fenceapi.Record{Key: "vf-layout/" + pf, PF: pf, Reason: reason, Since: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	touch(t, filepath.Join(fenceDir, fenceapi.FileName("vf-layout/"+pf)), data, time.Now())
	listed, errOut := listFenced(t, append(args, "--all")...)
	if errOut != "" {
		t.Errorf("stderr %q", errOut)
	}
	fencedVFs := 0
	for _, d := range listed.Devices {
		want := ""
		if d.Device == pf || pfOf(t, sysRoot, d.Device) == pf {
			want, fencedVFs = reason, fencedVFs+1
		}
		if d.Fenced != want {
			t.Errorf("%s: fenced %q, want %q", d.Device, d.Fenced, want)
		}
	}
	if fencedVFs < 2 {
		t.Errorf("%d devices of PF %s listed, want the PF and its VFs", fencedVFs, pf)
	}
	rows, _ := deviceRows(t, mustRun(t, args...))
	if got := rows["0000:3b:01.0"]; !strings.Contains(got, "|"+reason+"|") {
		t.Errorf("0000:3b:01.0: %q, want FENCED %q", got, reason)
	}

	touch(t, filepath.Join(fenceDir, fenceapi.FileName("vf-layout/0000:3e:00.0")), []byte(`{"version":1,`), time.Now())
	listed, errOut = listFenced(t, args...)
	if !strings.Contains(errOut, "fences unknown: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("stderr %q, want one line saying the fences are unknown", errOut)
	}
	for _, d := range listed.Devices {
		if !strings.HasPrefix(d.Fenced, "fences unknown: ") || !strings.Contains(d.Fenced, fenceDir) {
			t.Errorf("%s: fenced %q, want the fences in %s unknown", d.Device, d.Fenced, fenceDir)
		}
	}
}

// TestDevicesUnknownHolders: a torn checkpoint in any driver's directory
// under the plugins directory that carries hwnet's marker leaves every
// device's holders unknown, naming the file; another driver's own torn
// checkpoint is none of hwnet's.
func TestDevicesUnknownHolders(t *testing.T) {
	cp := checkpoint.New()
	cp.Claims[types.UID("uid-y")] = &checkpoint.Claim{Namespace: "default", Name: "y",
		Devices: []checkpoint.Device{{Request: "vf", Resource: "intel.com/netdev", PCIAddress: "0000:3b:01.2"}}}
	data, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		data    []byte
		unknown bool
	}{
		{"torn hwnet checkpoint", data[:len(data)-12], true},
		{"another driver's torn checkpoint", []byte(`{"version":1,"entries":`), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := heldNode(t)
			torn := filepath.Join(flagValue(t, args, "--dra-plugins-dir"), "net.example.com", "checkpoint.json")
			touch(t, torn, tc.data, time.Now())
			listed, errOut := listFenced(t, args...)
			if !tc.unknown {
				if errOut != "" || len(listed.UnknownSources) != 0 {
					t.Errorf("stderr %q, unknown sources %q; want none", errOut, listed.UnknownSources)
				}
				return
			}
			if want := "holders from DRA checkpoint unknown: " + torn; !strings.HasPrefix(errOut, "hwnetctl devices: "+want) {
				t.Errorf("stderr %q, want %q", errOut, want)
			}
			for _, d := range listed.Devices {
				if !strings.Contains(d.Unknown, "DRA checkpoint: "+torn) {
					t.Errorf("%s: unknown %q, want the torn checkpoint named", d.Device, d.Unknown)
				}
			}
			rows, _ := deviceRows(t, mustRun(t, args...))
			if got := rows["0000:3b:01.0"]; !strings.HasSuffix(got, "|unknown: DRA checkpoint|-") {
				t.Errorf("0000:3b:01.0: %q, want HOLDER unknown: DRA checkpoint", got)
			}
		})
	}
}

// TestDevicesPendingReset (issue 42): a VF whose settings reset is
// pending (the shim tore its pod down with the agent away) shows withheld,
// saying why and since when; no other device does.
func TestDevicesPendingReset(t *testing.T) {
	args := heldNode(t)
	cacheDir := flagValue(t, args, "--cni-cache-dir")
	const vf = "0000:3b:01.3"
	p := &vfreset.Pending{Record: vfsettings.Record{PFPCIAddress: "0000:3b:00.0", PCIAddress: vf},
		Reason: "container c1 of pod ns/p deleted by the shim while hwnet-agent was away", Since: time.Now().UTC()}
	if err := vfreset.Leave(vfreset.Dir(cacheDir), p); err != nil {
		t.Fatal(err)
	}
	listed, errOut := listFenced(t, append(args, "--all")...)
	if errOut != "" {
		t.Errorf("stderr %q", errOut)
	}
	seen := false
	for _, d := range listed.Devices {
		withheld := strings.Contains(d.Fenced, "its VF settings reset is pending since") && strings.Contains(d.Fenced, p.Reason)
		if withheld != (d.Device == vf) {
			t.Errorf("%s: fenced %q", d.Device, d.Fenced)
		}
		seen = seen || d.Device == vf
	}
	if !seen {
		t.Errorf("%s not listed", vf)
	}
}

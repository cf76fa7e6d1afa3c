package agent_test

import (
	"net/http"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/node/devlink"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestAgentVFLayout: a vfLayouts entry for the first E810-C (8 VFs, 6-7
// on vfio-pci) asking for 4 VFs with 0-1 on vfio-pci waits while a pod
// holds one of its VFs, then is applied once the pod lets go, and the
// pools follow: 2+6 VFs on iavf, 2+2 on vfio-pci.
func TestAgentVFLayout(t *testing.T) {
	f := newFixture(t, virtualnode.DefaultSpec(), defaultConfig+`
vfLayouts:
  - name: pf0
    selectors: {pfNames: [enp59s0f0]}
    numVfs: 4
    drivers: [{vfs: "0-1", driver: vfio-pci}]
`)
	vnodetest.EnactWrites(t, f.node)
	f.podres.SetPod("default", "cnf", netdevice, "0000:3b:01.3")
	f.start(t)
	f.wait(t, netdevice, "registration", counts(12, 12))
	f.waitLog(t, `msg="VF layout waits" pf=0000:3b:00.0 layout=pf0 why="device 0000:3b:01.3 is held by pod default/cnf`)
	f.wait(t, netdevice, "the held PF's VFs as they were", counts(12, 12))

	f.podres.SetPod("default", "cnf", netdevice)
	f.wait(t, netdevice, "VFs 2-3 of PF 0 on iavf, PF 1's 6", counts(8, 8))
	f.wait(t, dpdk, "VFs 0-1 of PF 0 on vfio-pci, PF 1's 6-7", counts(4, 4))
	f.waitLog(t, `msg="VF layout applied" pf=0000:3b:00.0 layout=pf0`)
}

// TestAgentVFLayoutBeyondTotalVFs: a layout asking the first E810-C
// (sriov_totalvfs 256) for 300 VFs makes the agent unready, saying which
// layout, PF, count and sriov_totalvfs, and its VFs stay as they are; the
// agent is ready again once the configuration drops it.
func TestAgentVFLayoutBeyondTotalVFs(t *testing.T) {
	f := newFixture(t, virtualnode.DefaultSpec(), defaultConfig+`
vfLayouts:
  - {name: many, selectors: {pfNames: [enp59s0f0]}, numVfs: 300}
`)
	probes := "http://" + freeAddr(t)
	f.opts.ProbeAddr = strings.TrimPrefix(probes, "http://")
	f.start(t)
	f.wait(t, netdevice, "registration", counts(12, 12))
	waitHTTP(t, probes+"/readyz", http.StatusServiceUnavailable,
		`VF layouts not applied: vfLayouts[0] "many": numVfs 300 is more than PF 0000:3b:00.0 has (sriov_totalvfs 256)`)
	f.waitLog(t, `msg="VF layout cannot apply" pf=0000:3b:00.0 layout=many`)

	f.writeConfig(t, defaultConfig)
	waitHTTP(t, probes+"/readyz", http.StatusOK, "ok")
	f.wait(t, netdevice, "the PF's VFs as they were", counts(12, 12))
}

// TestAgentVFLayoutESwitch: the agent's one ESwitch sets the mode a
// layout declares (here its record, as --devlink=record:PATH gives) and
// is what discovery reads the mode from: the first E810-C is switched to
// switchdev with no VF present, then gets its 4 VFs.
func TestAgentVFLayoutESwitch(t *testing.T) {
	f := newFixture(t, virtualnode.DefaultSpec(), defaultConfig+`
vfLayouts:
  - {name: ovs, selectors: {pfNames: [enp59s0f0]}, numVfs: 4, eswitchMode: switchdev}
`)
	record := devlink.NewRecord(filepath.Join(t.TempDir(), "devlink.jsonl"))
	f.opts.ESwitch = record
	vnodetest.EnactWrites(t, f.node)
	f.start(t)
	f.waitLog(t, `msg="VF layout applied" pf=0000:3b:00.0 layout=ovs`)
	f.wait(t, netdevice, "PF 0's 4 VFs on iavf, PF 1's 6", counts(10, 10))
	sets, err := devlink.ReadSets(record.Path())
	if want := []devlink.Set{{PCIAddress: "0000:3b:00.0", Mode: devlink.ModeSwitchdev}}; err != nil || !slices.Equal(sets, want) {
		t.Errorf("devlink sets %+v, %v; want %+v", sets, err, want)
	}
}

// TestAgentVFLayoutSFs: a vfLayouts entry bringing the ConnectX-6 Dx p2
// (SFs 88 and 89) to switchdev with 3 SFs, through the devlink record as
// --devlink=record:PATH gives and the virtual node enacts, waits while a
// pod holds one of its SFs, naming the pod, then switches the PF and adds
// sfnum 90 once the pod lets go: the SF pool grows from 2 to 3.
func TestAgentVFLayoutSFs(t *testing.T) {
	spec := virtualnode.DefaultSpec()
	spec.PFs = append(spec.PFs, virtualnode.PFSpec{Model: "ConnectX-6 Dx", SFs: 2, Names: []string{"p2"}})
	f := newFixture(t, spec, strings.Replace(defaultConfig, "resourceList:\n", "resourceList:\n"+sfPool, 1)+`
vfLayouts:
  - {name: sfs, selectors: {pfNames: [p2]}, numVfs: 0, eswitchMode: switchdev, numSfs: 3}
`)
	record := devlink.NewRecord(filepath.Join(t.TempDir(), "devlink.jsonl"))
	f.opts.ESwitch = record
	vnodetest.EnactWrites(t, f.node)
	vnodetest.EnactDevlinkRecord(t, f.node, record.Path())
	held := sfNamed(t, f.node, 89)
	f.podres.SetPod("default", "sf-user", sfResource, held)
	f.start(t)
	f.wait(t, sfResource, "registration", counts(2, 2))
	f.waitLog(t, `msg="VF layout waits" pf=`+sfPF(t, f.node)+` layout=sfs why="device `+held+` is held by pod default/sf-user`)

	f.podres.SetPod("default", "sf-user", sfResource)
	f.waitLog(t, `msg="VF layout applied" pf=`+sfPF(t, f.node)+` layout=sfs`)
	f.wait(t, sfResource, "the PF's 3 SFs", counts(3, 3))
	sets, err := devlink.ReadSets(record.Path())
	want := []devlink.Set{{PCIAddress: sfPF(t, f.node), Mode: devlink.ModeSwitchdev}, {PCIAddress: sfPF(t, f.node), Port: devlink.PortAdd, SFNum: new(90)}}
	if err != nil || !reflect.DeepEqual(sets, want) {
		t.Errorf("devlink sets %+v, %v; want %+v", sets, err, want)
	}
}

const (
	sfResource = "nvidia.com/sf"
	sfPool     = "  - {resourceName: sf, resourcePrefix: nvidia.com, deviceType: auxNetDevice, selectors: {auxTypes: [sf], pfNames: [p2]}}\n"
)

// sfPF is the PCI address of the node's PF p2.
func sfPF(t *testing.T, n *virtualnode.Node) string {
	t.Helper()
	for _, f := range n.Devices() {
		if f.Ifname == "p2" {
			return f.Addr
		}
	}
	t.Fatal("no PF p2")
	return ""
}

// sfNamed is the auxiliary device name of p2's SF with this sfnum.
func sfNamed(t *testing.T, n *virtualnode.Node, num int) string {
	t.Helper()
	f, _ := n.Device(sfPF(t, n))
	for _, sf := range f.SFs {
		if sf.Num == num {
			return sf.Name
		}
	}
	t.Fatalf("p2 has no SF %d", num)
	return ""
}

package agent_test

import (
	"net/http"
	"path/filepath"
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

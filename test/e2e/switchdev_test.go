package e2e

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/hwnet-io/hwnet/test/e2e/cluster"
)

// devlinkLog is the devlink stand-in's record the agent keeps its PFs'
// eSwitch modes and SF ports in: the virtual node's PFs have no devlink,
// and its hwnet-vnode-kernel enacts the record's SF ports.
const devlinkLog = cluster.DevlinkRecord

// withESwitch is config whose last vfLayouts entry also declares mode.
func withESwitch(config []byte, mode string) []byte {
	return append(append([]byte{}, config...), "    eswitchMode: "+mode+"\n"...)
}

// TestSwitchdevRepresentor (issue 45): with devlink's stand-in
// (--devlink=record:), a vfLayouts entry puts the second E810-C in
// switchdev mode, through no VFs and back to its 8; a VF's representor
// (the virtual node's veth peer, port name pf0vfN) is then named in a
// device plugin pod's network-status device-info and, with the pool in
// DRA mode, in the claim's status.devices[].data. The node ends with its
// VFs as they were.
func TestSwitchdevRepresentor(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	original := e.defaultPools(t)
	e.useDevlinkRecord(ctx, t)
	// Registered after useDevlinkRecord, so it runs first.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		e.restoreVFs(ctx, t, original, secondE810)
	})
	// Timed out on a loaded 2-core machine waiting for the layout's event
	// (2026-12-02, 2026-12-06): the agent's side of a failure. The second
	// log showed an agent that never had the layout, started on the
	// ConfigMap's content from before it; switchPools now waits for the
	// agent to serve the new one.
	e.agentLogOnFailure(t)
	switchdev := func(config []byte) []byte {
		return withESwitch(withVFLayout(config, secondE810, len(secondE810.vfs), secondE810.drivers), "switchdev")
	}
	// The pools are counted once the layout is applied: while it runs,
	// its VFs are on their way to their drivers.
	e.switchPools(ctx, t, switchdev(original))
	t.Log(e.waitNodeEvent(ctx, t, "VFLayoutApplied", secondE810.name, "switchdev"))
	e.waitPools(ctx, t, switchdev(original))
	if err := e.c.SyncDevices(); err != nil {
		t.Fatal(err)
	}
	e.waitAllocatable(ctx, t, sriovResource, 6)

	pod := workloadPod("switchdev-dp", `[{"name": "sriov-net", "ips": ["10.56.9.1/24"]}]`, map[corev1.ResourceName]int64{sriovResource: 1})
	e.cleanupPods(t, pod.Name)
	pod, err := e.runPod(ctx, pod, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := networkStatus(t, pod)[1]
	if got, want := st.DeviceInfo.Pci.RepresentorDevice, e.representorOf(t, pciAddress(st)); got == "" || got != want {
		t.Errorf("network-status device-info %+v: representor %q, want %q", *st.DeviceInfo.Pci, got, want)
	}
	if err := e.deletePods(ctx, pod.Name); err != nil {
		t.Fatal(err)
	}

	e.usePools(ctx, t, switchdev(claimNetPoolsConfig(t, e.repo)))
	e.createTemplates(ctx, t, "sriov-net-one-vf-claim-template.yaml")
	claimed := workloadPod("switchdev-dra", "", nil)
	claimed.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "vf", ResourceClaimTemplateName: new("sriov-net-one-vf")}}
	claimed.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "vf"}}
	e.cleanupPods(t, claimed.Name)
	if claimed, err = e.runPod(ctx, claimed, 1); err != nil {
		t.Fatal(err)
	}
	want := e.representorOf(t, pciAddress(networkStatus(t, claimed)[1]))
	if got := claimRepresentor(t, e.claimDevices(ctx, t, claimed)); got == "" || got != want {
		t.Errorf("the claim's status.devices[].data representor %q, want %q", got, want)
	}
	if err := e.deletePods(ctx, claimed.Name); err != nil {
		t.Fatal(err)
	}
}

// useDevlinkRecord puts the agent on devlink's stand-in, from an empty
// devlinkLog, until the test ends; the record goes once the agent is back
// on devlink: its modes and SF ports are the stand-in's, not the node's.
func (e *env) useDevlinkRecord(ctx context.Context, t *testing.T) {
	t.Helper()
	removeLog := func(ctx context.Context) error {
		_, err := Exec(ctx, e.c, nil, "rm", "-f", devlinkLog)
		return err
	}
	if err := removeLog(ctx); err != nil {
		t.Fatal(err)
	}
	// Registered before agentArgs, so it runs once the agent is back on
	// devlink.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if err := removeLog(ctx); err != nil {
			t.Error(err)
		}
	})
	e.agentArgs(ctx, t, "--devlink=record:"+devlinkLog)
}

// representorOf is the representor the virtual node draws for the VF.
func (e *env) representorOf(t *testing.T, vf string) string {
	t.Helper()
	f, ok := e.c.Node().Device(vf)
	if !ok || f.Representor == nil {
		t.Fatalf("the node has no VF %q with a representor", vf)
	}
	return f.Representor.Name
}

// claimRepresentor is the representor hwnet's one device status entry
// names in its data.
func claimRepresentor(t *testing.T, devs []resourceapi.AllocatedDeviceStatus) string {
	t.Helper()
	var data struct{ Representor string }
	if len(devs) != 1 || devs[0].Data == nil || json.Unmarshal(devs[0].Data.Raw, &data) != nil {
		t.Fatalf("claim status.devices %+v: want one entry with data", devs)
	}
	return data.Representor
}

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// withSFCount is config with a vfLayouts entry bringing sfPF, with the
// VFs it has, to switchdev mode with num SFs.
func withSFCount(config []byte, numVFs, num int) []byte {
	layout := fmt.Sprintf("\nvfLayouts:\n  - name: e2e-%s\n    selectors: {pfNames: [%s]}\n    numVfs: %d\n    eswitchMode: switchdev\n    numSfs: %d\n",
		sfPF, sfPF, numVFs, num)
	return append(append([]byte{}, config...), layout...)
}

// TestSFCount (issue 45): with devlink's stand-in (--devlink=record:),
// which the virtual node's kernel emulation enacts as mlx5 would, a
// vfLayouts entry asks sfPF (SFs 88 and 89) for 3 SFs while a pod holds
// one: the change waits, a VFLayoutWaiting Node Event naming the pod and
// its SF, and the PF keeps its 2 SFs; once the pod is deleted the PF is
// brought to switchdev with sfnum 90 added, and 3 SFs are allocatable.
// The test ends with the PF's 2 SFs as built and the default
// configuration back.
func TestSFCount(t *testing.T) {
	e := setup(t)
	ctx := testContext(t)
	original := e.defaultPools(t)
	pools := append(append([]byte{}, original...), sfPool...)
	pf := e.sfPFAddress(t)
	numVFs := len(e.nodeVFs(pf))
	e.useDevlinkRecord(ctx, t)
	// Registered after useDevlinkRecord, so it runs first, with the record.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
		defer cancel()
		if !slices.Equal(e.nodeSFs(pf), []int{88, 89}) {
			e.switchPools(ctx, t, withSFCount(pools, numVFs, 2))
			e.waitNodeSFs(ctx, t, pf, []int{88, 89})
		}
		e.usePools(ctx, t, original)
	})
	e.agentLogOnFailure(t)
	e.vnodeKernelLogOnFailure(t)
	e.usePools(ctx, t, pools)
	e.waitAllocatable(ctx, t, sfResource, 2)

	holder := e.startPod(ctx, t, workloadPod("sfcount-holder", "", map[corev1.ResourceName]int64{sfResource: 1}))
	held := e.podEnv(ctx, t, holder.Name)["PCIDEVICE_NVIDIA_COM_SF"]
	e.switchPools(ctx, t, withSFCount(pools, numVFs, 3))
	ev := e.waitNodeEvent(ctx, t, "VFLayoutWaiting", sfPF, "pod "+podNamespace+"/"+holder.Name)
	if held == "" || !strings.Contains(ev, held) {
		t.Errorf("waiting Event %q does not name the held SF %q", ev, held)
	}
	if got := e.nodeSFs(pf); !slices.Equal(got, []int{88, 89}) {
		t.Fatalf("the PF has SFs %v while one is held, want 88 and 89", got)
	}

	if err := e.deletePods(ctx, holder.Name); err != nil {
		t.Fatal(err)
	}
	t.Log(e.waitNodeEvent(ctx, t, "VFLayoutApplied", sfPF, "eSwitch switchdev, 3 SFs"))
	e.waitNodeSFs(ctx, t, pf, []int{88, 89, 90})
	e.waitAllocatable(ctx, t, sfResource, 3)
}

// vnodeKernelLogOnFailure writes the end of hwnet-vnode-kernel's log to
// the test's log if the test fails: it says which SF port it enacted or
// refused.
func (e *env) vnodeKernelLogOnFailure(t *testing.T) {
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		out, err := os.ReadFile(filepath.Join(logDir(e.c), "hwnet-vnode-kernel.log"))
		if len(out) > 20000 {
			out = out[len(out)-20000:]
		}
		t.Logf("the end of hwnet-vnode-kernel's log (%v):\n%s", err, out)
	})
}

// nodeSFs are the sfnums of the PF's SFs as the virtual node has them.
func (e *env) nodeSFs(pf string) []int {
	f, _ := e.c.Node().Device(pf)
	var out []int
	for _, sf := range f.SFs {
		out = append(out, sf.Num)
	}
	return out
}

// waitNodeSFs waits until the PF's SFs have these sfnums.
func (e *env) waitNodeSFs(ctx context.Context, t *testing.T, pf string, want []int) {
	t.Helper()
	mustPoll(ctx, t, fmt.Sprintf("PF %s's SFs %v", pf, want), func(context.Context) error {
		if got := e.nodeSFs(pf); !slices.Equal(got, want) {
			return fmt.Errorf("they are %v", got)
		}
		return nil
	})
}

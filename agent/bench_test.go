package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hwnet-io/hwnet/agent"
	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/kubeapi"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// BenchmarkAgentStartToFirstList measures what kubelet waits for after
// the agent starts: hwdb, configuration, discovery of a node with 8 E810-C
// PFs of 256 VFs each (2048 VFs, real veth netdevs), matching, serving,
// registering, and the first ListAndWatch list with every VF in it.
func BenchmarkAgentStartToFirstList(b *testing.B) {
	spec := &virtualnode.Spec{Name: "bench-start", PFs: []virtualnode.PFSpec{{Model: "E810-C", Count: 8, VFs: 256, NUMA: []int{0, 1}}}}
	f := newFixture(b, spec, "resourceList:\n  - resourceName: sriov_netdevice\n    selectors: {drivers: [iavf]}\n")
	for b.Loop() {
		f.runUntil(b, func() {
			if _, err := f.kubelet.WaitTimeout(10*time.Second, netdevice, counts(2048, 2048)); err != nil {
				b.Fatal(err)
			}
		})
		if err := f.kubelet.Restart(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// runUntil runs the agent until ready returns, timed, then stops it with
// the benchmark's timer stopped; the caller restarts the timer once it has
// put things back for the next round.
func (f *fixture) runUntil(b *testing.B, ready func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	a, err := agent.New(f.opts)
	if err != nil {
		b.Fatal(err)
	}
	go func() { done <- a.Run(ctx) }()
	ready()
	b.StopTimer()
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkAgentLinkDown measures from the netlink request that takes a
// PF's link down to kubelet's ListAndWatch showing its VFs unhealthy.
func BenchmarkAgentLinkDown(b *testing.B) {
	f := newFixture(b, virtualnode.DefaultSpec(), defaultConfig)
	f.start(b)
	f.wait(b, netdevice, "registration", counts(12, 12))
	ns, err := netns.GetFromName(f.node.NetnsName())
	if err != nil {
		b.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	pf, err := h.LinkByName("enp59s0f0")
	if err != nil {
		b.Fatal(err)
	}
	setLink := func(up bool, healthy int) {
		set := h.LinkSetDown
		if up {
			set = h.LinkSetUp
		}
		if err := set(pf); err != nil {
			b.Fatal(err)
		}
		if _, err := f.kubelet.WaitTimeout(5*time.Second, netdevice, counts(12, healthy)); err != nil {
			b.Fatal(err)
		}
	}
	for b.Loop() {
		setLink(false, 6)
		b.StopTimer()
		setLink(true, 12)
		b.StartTimer()
	}
}

// BenchmarkAgentReaction measures how long kubelet waits to see a change
// that needs no link event: a kubelet restart (every pool registered and
// listed again), a configuration edit, and a change of sriov_numvfs
// (announced by uevents, then re-discovered; the safety rescan at its
// default interval plays no part).
func BenchmarkAgentReaction(b *testing.B) {
	f := newFixture(b, virtualnode.DefaultSpec(), defaultConfig)
	f.opts.PollInterval, f.opts.RescanInterval = agent.DefaultPollInterval, agent.DefaultRescanInterval
	f.start(b)
	f.wait(b, netdevice, "registration", counts(12, 12))
	ctx := context.Background()
	b.Run("kubelet-restart", func(b *testing.B) {
		for b.Loop() {
			if err := f.kubelet.Restart(); err != nil {
				b.Fatal(err)
			}
			for _, r := range []string{netdevice, dpdk, ib, empty} {
				f.wait(b, r, "re-registration", func(st testkubelet.State) bool { return st.Registered && st.Lists > 0 })
			}
		}
	})
	edited := strings.Replace(defaultConfig, `drivers: [iavf]}`, `drivers: [iavf], pfNames: ["enp59s0f0#0-3"]}`, 1)
	b.Run("config-edit", func(b *testing.B) {
		for b.Loop() {
			f.writeConfig(b, edited)
			f.wait(b, netdevice, "4 VFs", counts(4, 4))
			b.StopTimer()
			f.writeConfig(b, defaultConfig)
			f.wait(b, netdevice, "12 VFs", counts(12, 12))
			b.StartTimer()
		}
	})
	b.Run("numvfs", func(b *testing.B) {
		for b.Loop() {
			if err := f.node.SetNumVFs(ctx, "0000:3b:00.0", 4); err != nil {
				b.Fatal(err)
			}
			f.wait(b, netdevice, "10 VFs", counts(10, 10))
			b.StopTimer()
			// VFs made anew bind iavf, 6 and 7 included.
			if err := f.node.SetNumVFs(ctx, "0000:3b:00.0", 8); err != nil {
				b.Fatal(err)
			}
			f.wait(b, netdevice, "14 VFs", counts(14, 14))
			b.StartTimer()
		}
	})
}

// BenchmarkAgentStartToSlices measures what the scheduler waits for after
// the agent starts with its pool in DRA mode: hwdb, configuration,
// discovery of 2048 VFs (8 E810-C PFs of 256, real veth netdevs),
// matching, the DRA driver's registration and the ResourceSlices of every
// VF on a real kube-apiserver (32 slices of 64).
func BenchmarkAgentStartToSlices(b *testing.B) {
	api := kubeapi.Start(b)
	spec := &virtualnode.Spec{Name: "bench-slices", PFs: []virtualnode.PFSpec{{Model: "E810-C", Count: 8, VFs: 256, NUMA: []int{0, 1}}}}
	f := newFixture(b, spec, "resourceList:\n  - resourceName: sriov_netdevice\n    mode: dra\n    selectors: {drivers: [iavf]}\n")
	const node = "bench-node"
	f.withDRA(b, api, node)
	onNode := metav1.ListOptions{FieldSelector: "spec.nodeName=" + node}
	for b.Loop() {
		f.runUntil(b, func() {
			kubeapi.WaitSliceDevices(b, api.Client(), onNode, time.Minute, "2048 devices published",
				func(d kubeapi.SliceDevices) bool { return len(d) == 2048 })
		})
		if err := api.Client().ResourceV1().ResourceSlices().DeleteCollection(context.Background(), metav1.DeleteOptions{}, onNode); err != nil {
			b.Fatal(err)
		}
		kubeapi.WaitSliceDevices(b, api.Client(), onNode, time.Minute, "slices deleted",
			func(d kubeapi.SliceDevices) bool { return len(d) == 0 })
		b.StartTimer()
	}
}

package watch

import (
	"fmt"
	"testing"

	"github.com/hwnet-io/hwnet/node/virtualnode"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// BenchmarkLinkEventLatency measures from LinkSetDown (or LinkSetUp) of
// a veth to the delivery of the event that says so: the time the agent
// needs to see a link go down, before marking its device unhealthy.
func BenchmarkLinkEventLatency(b *testing.B) {
	path, h := newNetns(b)
	addVeth(b, h, "a0", "b0")
	a := linkAt(linkIndex(b, h, "a0"))
	if err := h.LinkSetUp(linkAt(linkIndex(b, h, "b0"))); err != nil {
		b.Fatal(err)
	}
	w, err := WatchLinks(path)
	if err != nil {
		b.Fatal(err)
	}
	events := run(b, w.Run)
	up := false
	for b.Loop() {
		up = !up
		set := h.LinkSetDown
		if up {
			set = h.LinkSetUp
		}
		if err := set(a); err != nil {
			b.Fatal(err)
		}
		for ev := receive(b, events); ev.Name != "a0" || ev.Up != up; ev = receive(b, events) {
		}
	}
}

// BenchmarkFingerprint takes the fingerprint of virtual nodes of 8 E810-C
// PFs with 256, 1024 and 2048 VFs in all, cold as Fingerprint does and
// warm as the poller does, which probes each function for sriov_numvfs
// once.
func BenchmarkFingerprint(b *testing.B) {
	db := vnodetest.OpenDB(b)
	for _, vfs := range []int{256, 1024, 2048} {
		spec := &virtualnode.Spec{Name: fmt.Sprintf("fp-%d", vfs), PFs: []virtualnode.PFSpec{
			{Model: "E810-C", Count: 8, VFs: vfs / 8},
		}}
		node := vnodetest.BuildForTest(b, spec, db, false)
		b.Run(fmt.Sprintf("vfs=%d/cold", vfs), func(b *testing.B) {
			for b.Loop() {
				if _, err := Fingerprint(node.SysRoot()); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(vfs+8), "ns/function")
		})
		b.Run(fmt.Sprintf("vfs=%d/warm", vfs), func(b *testing.B) {
			scan := newPCIScanner(node.SysRoot())
			for b.Loop() {
				if _, err := scan.fingerprint(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(vfs+8), "ns/function")
		})
	}
}

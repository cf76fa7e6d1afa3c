package ledger_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/node/devinfo"
	"github.com/hwnet-io/hwnet/node/ledger"
)

// BenchmarkPollIdle is the agent's ledger poll, every --ledger-interval,
// on a full node where nothing changes: 110 pods hold a VF each, and the
// poll only stats the checkpoint and the device-info directory.
func BenchmarkPollIdle(b *testing.B) {
	kubelet, src := newSources(b)
	for i := range 110 {
		kubelet.SetPod("ns", fmt.Sprint("pod-", i), "intel.com/vf", fmt.Sprintf("0000:3b:%02x.%d", 2+i/8, i%8))
	}
	r := ledger.NewReader(src)
	defer r.Close()
	now := time.Now()
	ledger.SetClock(r, func() time.Time { return now })
	r.Poll(b.Context(), true)
	now = now.Add(15 * time.Second) // settled, kubelet's answer not yet stale
	if l := r.Poll(b.Context(), false); len(l.Devices()) != 110 {
		b.Fatalf("%d devices held, want 110", len(l.Devices()))
	}
	b.ReportAllocs()
	for b.Loop() {
		r.Poll(b.Context(), false)
	}
}

// BenchmarkReadAllocating is the read an Allocate makes the agent take on
// a node whose 1,000 VFs are each held by a pod: a VF's device-info file
// goes (its pod ended and the collector took it) and comes back (a new
// pod's Allocate), and kubelet is asked.
func BenchmarkReadAllocating(b *testing.B) {
	kubelet, src := newSources(b)
	const held = 1000
	vf := func(i int) string { return fmt.Sprintf("0000:%02x:%02x.%d", 0x3b+i/256, i/8%32, i%8) }
	for i := range held {
		kubelet.SetPod("ns", fmt.Sprint("pod-", i), "intel.com/vf", vf(i))
		if err := devinfo.Write(src.DevinfoDir, "intel.com/vf", vf(i), devinfo.NewPCI(devinfo.PCI{PCIAddress: vf(i)})); err != nil {
			b.Fatal(err)
		}
	}
	r := ledger.NewReader(src)
	defer r.Close()
	if l := r.Read(b.Context()); len(l.Devices()) != held {
		b.Fatalf("%d devices held, want %d", len(l.Devices()), held)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := devinfo.Remove(src.DevinfoDir, "intel.com/vf", vf(i%held)); err != nil {
			b.Fatal(err)
		}
		if err := devinfo.Write(src.DevinfoDir, "intel.com/vf", vf(i%held), devinfo.NewPCI(devinfo.PCI{PCIAddress: vf(i % held)})); err != nil {
			b.Fatal(err)
		}
		r.Read(b.Context())
	}
}

// BenchmarkReserveOnFullNode is an Allocate's reservation, and its
// release, on a node whose 1,000 other VFs are each held by a pod: each
// one publishes the ledger's snapshot anew.
func BenchmarkReserveOnFullNode(b *testing.B) {
	kubelet, src := newSources(b)
	const held = 1000
	for i := range held {
		kubelet.SetPod("ns", fmt.Sprint("pod-", i), "intel.com/vf", fmt.Sprintf("0000:%02x:%02x.%d", 0x3b+i/256, i/8%32, i%8))
	}
	book := openBook(b, ledger.BookOptions{Sources: src})
	if l := book.Snapshot(); len(l.Devices()) != held {
		b.Fatalf("%d devices held, want %d", len(l.Devices()), held)
	}
	hold := ledger.Request{Devices: []string{"0000:5b:00.1"}, Holder: ledger.Holder{Kind: ledger.Claim, Namespace: "ns", Name: "c", UID: "uid-c"}}
	b.ReportAllocs()
	for b.Loop() {
		if err := book.Reserve(b.Context(), hold); err != nil {
			b.Fatal(err)
		}
		book.Release(b.Context(), hold.Holder)
	}
}

// BenchmarkPollStale is the poll an idle node takes every 30 s, applied
// to the Book as its Watch does: kubelet's answer has grown stale, it is
// asked again and answers what it answered before, 150 pods holding
// 1,500 VFs, each with its device-info file (the device plugin part of
// make bench-peers at rest).
func BenchmarkPollStale(b *testing.B) {
	kubelet, src := newSources(b)
	vf := func(i int) string { return fmt.Sprintf("0000:%02x:%02x.%d", 0x3b+i/256, i/8%32, i%8) }
	for p := range 150 {
		ids := make([]string, 10)
		for i := range ids {
			ids[i] = vf(p*10 + i)
			if err := devinfo.Write(src.DevinfoDir, "intel.com/vf", ids[i], devinfo.NewPCI(devinfo.PCI{PCIAddress: ids[i]})); err != nil {
				b.Fatal(err)
			}
		}
		kubelet.SetPod("ns", fmt.Sprint("pod-", p), "intel.com/vf", ids...)
	}
	book := openBook(b, ledger.BookOptions{Sources: src})
	r := ledger.WatchReader(book)
	defer r.Close()
	now := time.Now()
	ledger.SetClock(r, func() time.Time { return now })
	if l := ledger.PollWatch(b.Context(), book, r, true); len(l.Devices()) != 1500 {
		b.Fatalf("%d devices held, want 1500", len(l.Devices()))
	}
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(30 * time.Second)
		ledger.PollWatch(b.Context(), book, r, false)
	}
}

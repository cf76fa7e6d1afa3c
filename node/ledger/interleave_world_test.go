package ledger_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	attachmentapi "github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	fenceapi "github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/api/vfreset"
	"github.com/hwnet-io/hwnet/node/ledger"
	"github.com/hwnet-io/hwnet/test/testkubelet"
)

// The interleaving test's node: two PFs with four VFs each. kubelet's
// device plugin resources are poolA (PF A's VFs, and poolA2, the same VFs
// as a renamed pool would offer them) and poolB (PF B's).
const (
	ilPFA   = "0000:3b:00.0"
	ilPFB   = "0000:3e:00.0"
	poolA   = "intel.com/a"
	poolA2  = "intel.com/a2"
	poolB   = "intel.com/b"
	ilNS    = "ns"
	ilOther = "other.hwnet.io"
	// kubeletSettle is how long a kubelet that started answers without
	// its pods, as far as an agent that started too knows.
	kubeletSettle = 30 * time.Second
)

func ilVFs(pf string) []string {
	bus := pf[:7]
	return []string{bus + ":02.0", bus + ":02.1", bus + ":02.2", bus + ":02.3"}
}

func ilPool(res string) []string {
	if res == poolB {
		return ilVFs(ilPFB)
	}
	return ilVFs(ilPFA)
}

// ilWorld is a Book on its real sources: kubelet's PodResources over gRPC
// (which can go away, or answer as a starting kubelet does, without its
// pods), the running driver's checkpoint and another driver's in the
// plugins directory, the CNI records as files and the fence files.
type ilWorld struct {
	t       testing.TB
	dir     string
	sysfs   string
	src     ledger.Sources
	records *fileRecords
	kubelet *testkubelet.PodResources
	book    *ledger.Book
	// watch is the reader the agent's Watch polls with, the Book's
	// second reader.
	watch *ledger.Reader
	now   time.Time
	m     *ilModel
}

func newILWorld(t testing.TB, m *ilModel) *ilWorld {
	w := &ilWorld{t: t, dir: t.TempDir(), now: time.Now(), m: m}
	w.sysfs = ilSysfs(t)
	w.records = &fileRecords{dir: filepath.Join(w.dir, "records")}
	if err := os.MkdirAll(w.records.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	w.src = ledger.Sources{PodResourcesSocket: filepath.Join(w.dir, "kubelet.sock"),
		Checkpoint: filepath.Join(w.dir, "plugins", "hwnet.io", "checkpoint.json"), PluginsDir: filepath.Join(w.dir, "plugins"),
		PodUID: m.podUID, PodRunning: m.podRunning, PodEndsTold: func() bool { return true }, Records: w.records, KubeletSettle: kubeletSettle,
		Resets: ledger.ResetFiles(filepath.Join(w.dir, vfreset.SubDir))}
	w.kubeletUp(false)
	// kubelet ran long before the agent started.
	if err := os.Chtimes(w.src.PodResourcesSocket, w.now.Add(-time.Hour), w.now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	w.writeCheckpoint()
	w.startBook()
	t.Cleanup(func() {
		w.book.Close()
		w.watch.Close()
		w.kubeletDown()
	})
	return w
}

// ilSysfs is a sysfs tree where each VF's physfn names its PF.
func ilSysfs(t testing.TB) string {
	root := t.TempDir()
	devices := filepath.Join(root, "bus/pci/devices")
	for _, pf := range []string{ilPFA, ilPFB} {
		if err := os.MkdirAll(filepath.Join(devices, pf), 0o755); err != nil {
			t.Fatal(err)
		}
		for _, vf := range ilVFs(pf) {
			if err := os.MkdirAll(filepath.Join(devices, vf), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink("../"+pf, filepath.Join(devices, vf, "physfn")); err != nil {
				t.Fatal(err)
			}
		}
	}
	return root
}

// startBook is the agent starting: a new Book loads every source and the
// fence files before anything is reserved.
func (w *ilWorld) startBook() {
	w.book = ledger.NewBook(ledger.BookOptions{Sources: w.src, SysfsRoot: w.sysfs, FenceDir: filepath.Join(w.dir, "fences")})
	ledger.SetBookClock(w.book, func() time.Time { return w.now })
	if err := w.book.Load(context.Background()); err != nil {
		w.t.Fatalf("Load: %v", err)
	}
	// The agent's first verdicts: nothing unhealthy yet.
	w.book.Judge(ledger.Verdicts{})
	if w.watch != nil {
		w.watch.Close()
	}
	w.watch = ledger.WatchReader(w.book)
	// Watch polls, asking kubelet, as it starts.
	ledger.PollWatch(context.Background(), w.book, w.watch, true)
}

// kubeletUp serves PodResources at a new socket; a starting kubelet
// answers without the pods it runs until kubeletStarted.
func (w *ilWorld) kubeletUp(starting bool) {
	os.Remove(w.src.PodResourcesSocket)
	pr, err := testkubelet.ServePodResources(w.src.PodResourcesSocket)
	if err != nil {
		w.t.Fatal(err)
	}
	// The socket's time is when kubelet started, on the Book's clock.
	if err := os.Chtimes(w.src.PodResourcesSocket, w.now, w.now); err != nil {
		w.t.Fatal(err)
	}
	w.kubelet, w.m.kubeletStarting, w.m.kubeletSince = pr, starting, w.now
	if !starting {
		w.kubeletStarted()
	}
}

// kubeletStarted has kubelet report every pod it allocated to.
func (w *ilWorld) kubeletStarted() {
	w.m.kubeletStarting = false
	for _, name := range slices.Sorted(maps.Keys(w.m.pods)) {
		p := w.m.pods[name]
		w.kubelet.SetPod(ilNS, name, p.resource, p.devices...)
	}
}

func (w *ilWorld) kubeletDown() {
	if w.kubelet != nil {
		w.kubelet.Close()
		w.kubelet = nil
	}
}

// setPod tells kubelet's PodResources of a pod's allocation, none to
// forget it, unless kubelet is down or starting.
func (w *ilWorld) setPod(name, res string, devices ...string) {
	if w.kubelet != nil && !w.m.kubeletStarting {
		w.kubelet.SetPod(ilNS, name, res, devices...)
	}
}

// writeCheckpoint writes the running driver's checkpoint with the
// model's prepared claims, as package dra does: whole, by rename.
func (w *ilWorld) writeCheckpoint() {
	cp := checkpoint.New()
	for name, c := range w.m.claims {
		cl := &checkpoint.Claim{Namespace: ilNS, Name: name, Pods: []string{c.podUID}, Prepared: w.now}
		for _, d := range c.devices {
			cl.Devices = append(cl.Devices, checkpoint.Device{Device: "pci-" + d, Resource: c.resource, PCIAddress: d})
		}
		cp.Claims[types.UID(c.uid)] = cl
	}
	data, err := checkpoint.Encode(cp)
	if err != nil {
		w.t.Fatal(err)
	}
	w.writeFile(w.src.Checkpoint, data)
}

// tearOther writes, or mends, another driver's checkpoint: torn, it
// cannot be read, so the claims it holds are unknown.
func (w *ilWorld) tearOther(torn bool) {
	path := filepath.Join(w.src.PluginsDir, ilOther, "checkpoint.json")
	data, err := checkpoint.Encode(checkpoint.New())
	if err != nil {
		w.t.Fatal(err)
	}
	if torn {
		data = []byte(`{"format": "` + checkpoint.Marker + `", "version": 3, "claims": {`)
	}
	w.writeFile(path, data)
}

func (w *ilWorld) writeFile(path string, data []byte) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		w.t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		w.t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		w.t.Fatal(err)
	}
}

// writeRecord writes the sandbox's CNI record; a nil sandbox writes an
// unreadable one under id.
func (w *ilWorld) writeRecord(id string, sb *ilSandbox) {
	data := []byte("not a record")
	if sb != nil {
		rec := &attachmentapi.Record{ContainerID: id, Netns: "/var/run/netns/" + id, PodNamespace: ilNS, PodName: sb.pod, PodUID: sb.podUID}
		for i, d := range sb.devices {
			rec.Attachments = append(rec.Attachments, attachmentapi.Attachment{Network: ilNS + "/net", IfName: fmt.Sprintf("net%d", i+1),
				ConfList: []byte(`{"cniVersion": "1.0.0", "name": "net", "plugins": [{"type": "sriov"}]}`), DeviceID: d, Resource: sb.resource, Claim: sb.claimUID})
		}
		var err error
		if data, err = attachmentapi.Encode(rec); err != nil {
			w.t.Fatal(err)
		}
	}
	w.writeFile(w.records.path(id), data)
	w.records.touch()
}

func (w *ilWorld) removeRecord(id string) {
	if err := os.Remove(w.records.path(id)); err != nil && !os.IsNotExist(err) {
		w.t.Fatal(err)
	}
	w.records.touch()
}

// layoutFence is a VF layout change's fence on the PF, kept on disk.
func layoutFence(pf string) ledger.Fence {
	return ledger.Fence{Key: "vf-layout/" + pf, PF: pf, Reason: "PF " + pf + "'s VF layout changes",
		Layout: &fenceapi.LayoutChange{Name: "pf", Before: []fenceapi.VF{{Driver: "iavf"}}, Target: fenceapi.Layout{NumVFs: 4}}}
}

// modeFence is a pool's mode switch fence on its devices.
func modeFence(res string) ledger.Fence {
	return ledger.Fence{Key: "mode/" + res, Devices: ilPool(res), Reason: "pool " + res + " changes front end"}
}

// fileRecords are CNI records, one file per container, as the agent's
// record store keeps them; the set's time is kept as it changes.
type fileRecords struct {
	dir     string
	changed time.Time
}

func (f *fileRecords) path(id string) string { return filepath.Join(f.dir, id) }

func (f *fileRecords) touch() { f.changed = f.changed.Add(time.Nanosecond) }

func (f *fileRecords) Changed() (time.Time, error) { return f.changed, nil }

func (f *fileRecords) RecordsDir() string { return f.dir }

func (f *fileRecords) List() ([]string, error) {
	entries, err := os.ReadDir(f.dir)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids, nil
}

func (f *fileRecords) Load(id string) (*attachmentapi.Record, error) {
	return attachmentapi.Load(f.path(id))
}

func (f *fileRecords) Modified(id string) (time.Time, error) {
	fi, err := os.Stat(f.path(id))
	if err != nil {
		return time.Time{}, err
	}
	return fi.ModTime(), nil
}

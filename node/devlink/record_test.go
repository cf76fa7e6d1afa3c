package devlink_test

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/hwnet-io/hwnet/node/devlink"
)

const (
	pf0 = "0000:3b:00.0"
	pf1 = "0000:3b:00.1"
)

// TestRecordModes: a PF the record never set is legacy, as the kernel
// boots it; else it is in the last mode set on it, whatever was set on
// other PFs since.
func TestRecordModes(t *testing.T) {
	ctx := context.Background()
	r := devlink.NewRecord(filepath.Join(t.TempDir(), "sub", "devlink.jsonl"))
	for _, tt := range []struct {
		set      *devlink.Set
		pf, want string
	}{
		{nil, pf0, devlink.ModeLegacy},
		{&devlink.Set{PCIAddress: pf0, Mode: devlink.ModeSwitchdev}, pf0, devlink.ModeSwitchdev},
		{&devlink.Set{PCIAddress: pf1, Mode: devlink.ModeSwitchdev}, pf0, devlink.ModeSwitchdev},
		{&devlink.Set{PCIAddress: pf0, Mode: devlink.ModeLegacy}, pf0, devlink.ModeLegacy},
		{nil, pf1, devlink.ModeSwitchdev},
	} {
		if tt.set != nil {
			if err := r.SetESwitchMode(ctx, tt.set.PCIAddress, tt.set.Mode); err != nil {
				t.Fatal(err)
			}
		}
		got, err := r.ESwitchMode(ctx, tt.pf)
		if err != nil || got != tt.want {
			t.Errorf("after %+v: %s is %q, %v; want %q", tt.set, tt.pf, got, err, tt.want)
		}
	}
}

// TestRecordRefuses: a mode hwnet does not set, or no PF, is refused and
// not recorded.
func TestRecordRefuses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "devlink.jsonl")
	r := devlink.NewRecord(path)
	for _, s := range []devlink.Set{{PCIAddress: pf0, Mode: "offload"}, {PCIAddress: pf0}, {Mode: devlink.ModeSwitchdev}} {
		if err := r.SetESwitchMode(context.Background(), s.PCIAddress, s.Mode); err == nil {
			t.Errorf("%+v: accepted", s)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused set was written: %v", err)
	}
}

// TestRecordConcurrent: sets from many goroutines each land whole, on a
// line of their own.
func TestRecordConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "devlink.jsonl")
	r := devlink.NewRecord(path)
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			mode := []string{devlink.ModeLegacy, devlink.ModeSwitchdev}[i%2]
			if err := r.SetESwitchMode(context.Background(), pf0, mode); err != nil {
				t.Error(err)
			}
			if _, err := r.ESwitchMode(context.Background(), pf0); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	sets, err := devlink.ReadSets(path)
	if err != nil || len(sets) != 32 {
		t.Errorf("%d sets read back, %v; want 32", len(sets), err)
	}
}

// TestRecordMalformed: a record that is not one set a line, or is over
// the size limit, is an error naming the file (and the line), never a
// mode guessed past it.
func TestRecordMalformed(t *testing.T) {
	good := `{"pciAddress":"` + pf0 + `","mode":"switchdev"}` + "\n"
	for _, tt := range []struct {
		name, data, want string
	}{
		{"torn", good + `{"pciAddress":"` + pf0, "line 2"},
		{"not JSON", "legacy\n" + good, "line 1"},
		{"blank line", good + "\n" + good, "line 2"},
		{"unknown field", `{"pciAddress":"` + pf0 + `","mode":"legacy","vf":1}` + "\n", "line 1"},
		{"two values", strings.TrimSpace(good) + "{}\n", "line 1"},
		{"bad mode", `{"pciAddress":"` + pf0 + `","mode":"Switchdev"}` + "\n", `"Switchdev"`},
		{"no PF", `{"mode":"legacy"}` + "\n", "pciAddress"},
		{"mode and port", `{"pciAddress":"` + pf0 + `","mode":"legacy","port":"add","sfnum":1}` + "\n", "one or the other"},
		{"odd port", `{"pciAddress":"` + pf0 + `","port":"new","sfnum":1}` + "\n", `port "new"`},
		{"port without sfnum", `{"pciAddress":"` + pf0 + `","port":"del"}` + "\n", "no sfnum"},
		{"oversize", strings.Repeat(good, devlink.MaxRecordSize/len(good)+1), "more than"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "devlink.jsonl")
			if err := os.WriteFile(path, []byte(tt.data), 0o644); err != nil {
				t.Fatal(err)
			}
			mode, err := devlink.NewRecord(path).ESwitchMode(context.Background(), pf0)
			if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %q, %v; want an error naming %s and %s", mode, err, path, tt.want)
			}
		})
	}
}

// TestNew: the spec names the kernel's devlink or a record; anything else
// is refused, naming it.
func TestNew(t *testing.T) {
	for _, tt := range []struct{ spec, want string }{
		{"netlink", "*devlink.Netlink"},
		{"record:/tmp/devlink.jsonl", "*devlink.Record"},
		{"record:", ""},
		{"ioctl", ""},
	} {
		e, err := devlink.New(tt.spec)
		got := ""
		if err == nil {
			got = typeName(e)
		} else if !strings.Contains(err.Error(), tt.spec) {
			t.Errorf("%q: error %v does not name it", tt.spec, err)
		}
		if got != tt.want {
			t.Errorf("%q: %q, %v; want %q", tt.spec, got, err, tt.want)
		}
	}
}

// FuzzParseSets: no content may panic the parser; what it accepts is
// sets of a PF and a mode hwnet sets, or of an SF port added or deleted.
func FuzzParseSets(f *testing.F) {
	f.Add([]byte(`{"pciAddress":"0000:3b:00.0","mode":"switchdev"}` + "\n"))
	f.Add([]byte(`{"pciAddress":"0000:3b:00.0","mode":"legacy"}{"x":1}`))
	f.Add([]byte("\n\n{"))
	f.Add([]byte(`{"pciAddress":"0000:3b:00.0","port":"add","sfnum":88}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sets, err := devlink.ParseSets(data)
		if err != nil {
			return
		}
		for _, s := range sets {
			sf := (s.Port == devlink.PortAdd || s.Port == devlink.PortDel) && s.SFNum != nil && s.Mode == ""
			if s.PCIAddress == "" || (devlink.CheckMode(s.Mode) != nil && !sf) {
				t.Fatalf("accepted %+v", s)
			}
		}
	})
}

// TestRecordSFs: a port add is refused while the record leaves the PF in
// legacy mode, as mlx5 refuses it, and recorded once the PF is in
// switchdev; Fold says which sfnums each PF's last port change adds or
// deletes, and its mode.
func TestRecordSFs(t *testing.T) {
	ctx := context.Background()
	r := devlink.NewRecord(filepath.Join(t.TempDir(), "devlink.jsonl"))
	if err := r.AddSF(ctx, pf0, 0); err == nil || !strings.Contains(err.Error(), "legacy mode") {
		t.Errorf("a port add in legacy mode: %v, want it refused naming the mode", err)
	}
	steps := []func() error{
		func() error { return r.SetESwitchMode(ctx, pf0, devlink.ModeSwitchdev) },
		func() error { return r.AddSF(ctx, pf0, 0) },
		func() error { return r.AddSF(ctx, pf0, 1) },
		func() error { return r.DeleteSF(ctx, pf0, 0) },
		func() error { return r.DeleteSF(ctx, pf1, 88) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	sets, err := devlink.ReadSets(r.Path())
	if err != nil || len(sets) != len(steps) {
		t.Fatalf("%d sets read back, %v; want %d", len(sets), err, len(steps))
	}
	folded := devlink.Fold(sets)
	for _, tt := range []struct {
		pf   string
		want devlink.PF
	}{
		{pf0, devlink.PF{Mode: devlink.ModeSwitchdev, SFs: map[int]bool{0: false, 1: true}}},
		{pf1, devlink.PF{Mode: devlink.ModeLegacy, SFs: map[int]bool{88: false}}},
		{"0000:5e:00.0", devlink.PF{Mode: devlink.ModeLegacy}},
	} {
		if got := folded.PF(tt.pf); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.pf, got, tt.want)
		}
	}
}

// TestRecordRefusesSFs: an sfnum devlink cannot carry is refused and not
// recorded.
func TestRecordRefusesSFs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "devlink.jsonl")
	r := devlink.NewRecord(path)
	for _, sfnum := range []int{-1, 1 << 32} {
		if err := r.DeleteSF(context.Background(), pf0, sfnum); err == nil || !strings.Contains(err.Error(), "sfnum") {
			t.Errorf("sfnum %d: %v, want it refused", sfnum, err)
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Errorf("a refused set was written: %v", err)
	}
}

package devinfo

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestFileName(t *testing.T) {
	tests := []struct {
		resource, id, want string
	}{
		{"intel.com/sriov-net", "0000:3b:02.0", "intel.com-sriov-net-0000:3b:02.0-device.json"},
		{"nvidia.com/ib_a", "0000:41:00.2", "nvidia.com-ib_a-0000:41:00.2-device.json"},
		// Multus flattens a '/' in device IDs too.
		{"example.org/x", "a/b", "example.org-x-a-b-device.json"},
	}
	for _, tt := range tests {
		if got := FileName(tt.resource, tt.id); got != tt.want {
			t.Errorf("FileName(%q, %q) = %q, want %q", tt.resource, tt.id, got, tt.want)
		}
	}
}

func TestCNIFileName(t *testing.T) {
	got := CNIFileName("ns/sriov-a", "0123abcd", "net1")
	if want := "ns-sriov-a-0123abcd_net1"; got != want {
		t.Errorf("CNIFileName = %q, want %q", got, want)
	}
}

// TestWriteProducesSpecFile checks the bytes a reader such as Multus sees:
// the keys of the specification and nothing else.
func TestWriteProducesSpecFile(t *testing.T) {
	tests := []struct {
		name string
		info *DeviceInfo
		want string
	}{
		{
			name: "pci VF",
			info: NewPCI(PCI{PCIAddress: "0000:3b:02.0", PFPCIAddress: "0000:3b:00.0"}),
			want: `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:02.0","pf-pci-address":"0000:3b:00.0"}}`,
		},
		{
			name: "pci with rdma, representor and vhost-net",
			info: NewPCI(PCI{PCIAddress: "0000:41:00.2", RDMADevice: "mlx5_2", PFPCIAddress: "0000:41:00.0",
				RepresentorDevice: "pf0vf0", VhostNet: "/dev/vhost-net"}),
			want: `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:41:00.2","vhost-net":"/dev/vhost-net",` +
				`"rdma-device":"mlx5_2","pf-pci-address":"0000:41:00.0","representor-device":"pf0vf0"}}`,
		},
		{
			name: "vdpa",
			info: NewVDPA(VDPA{ParentDevice: "vdpa0", Driver: "vhost", Path: "/dev/vhost-vdpa-0", PCIAddress: "0000:3b:02.0"}),
			want: `{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa0","driver":"vhost",` +
				`"path":"/dev/vhost-vdpa-0","pci-address":"0000:3b:02.0"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "devinfo", "dp")
			if err := Write(dir, "intel.com/sriov", "dev1", tt.info); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(filepath.Join(dir, "intel.com-sriov-dev1-device.json"))
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tt.want {
				t.Errorf("file content\n got %s\nwant %s", data, tt.want)
			}
			got, err := ReadFile(filepath.Join(dir, FileName("intel.com/sriov", "dev1")))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.info) {
				t.Errorf("ReadFile = %+v, want %+v", got, tt.info)
			}
		})
	}
}

func TestWriteModesAndReplace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "dp")
	for _, addr := range []string{"0000:3b:02.0", "0000:3b:02.1"} {
		if err := Write(dir, "intel.com/a", "dev", NewPCI(PCI{PCIAddress: addr})); err != nil {
			t.Fatal(err)
		}
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o755 {
		t.Errorf("created dir mode %v, want 0755", st.Mode().Perm())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Fatalf("dir has %d entries (temporary files left?): %v", len(entries), entries)
	}
	fi, err := entries[0].Info()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("file mode %v, want 0644", fi.Mode().Perm())
	}
	got, err := ReadFile(filepath.Join(dir, FileName("intel.com/a", "dev")))
	if err != nil {
		t.Fatal(err)
	}
	if got.PCI.PCIAddress != "0000:3b:02.1" {
		t.Errorf("second Write did not replace the first: %+v", got.PCI)
	}
}

// TestWriteKeepsIdenticalFile checks that rewriting a device's unchanged
// information only touches the file, and that any difference replaces it.
func TestWriteKeepsIdenticalFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName("r/x", "d"))
	info := NewPCI(PCI{PCIAddress: "0000:3b:01.0"})
	inode := func() uint64 {
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		return st.Ino
	}
	if err := Write(dir, "r/x", "d", info); err != nil {
		t.Fatal(err)
	}
	first := inode()
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "r/x", "d", info); err != nil {
		t.Fatal(err)
	}
	if inode() != first {
		t.Error("an identical Write replaced the file")
	}
	if st, err := os.Stat(path); err != nil || !st.ModTime().After(old.Add(time.Minute)) {
		t.Errorf("an identical Write left the modification time at %v (%v), want now", st.ModTime(), err)
	}
	// The same content followed by more bytes is not the same file.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, append(data, ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "r/x", "d", info); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(path); string(got) != string(data) {
		t.Errorf("file with trailing bytes kept: %q", got)
	}
}

func TestWriteRejects(t *testing.T) {
	tests := []struct {
		name, resource, id string
		info               *DeviceInfo
		wantErr            string
	}{
		{"empty resource", "", "d", NewPCI(PCI{PCIAddress: "a"}), "empty resource name"},
		{"empty device ID", "r/x", "", NewPCI(PCI{PCIAddress: "a"}), "empty device ID"},
		{"nil info", "r/x", "d", nil, "nil information"},
		{"no pci address", "r/x", "d", NewPCI(PCI{}), "pci.pci-address is required"},
		{"bad vdpa driver", "r/x", "d", NewVDPA(VDPA{ParentDevice: "vdpa0", Driver: "vhost_vdpa", Path: "/dev/x"}),
			`vdpa.driver "vhost_vdpa" is not one of vhost, virtio`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			err := Write(dir, tt.resource, tt.id, tt.info)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Write error = %v, want it to contain %q", err, tt.wantErr)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("a rejected Write left %v", entries)
			}
		})
	}
}

func TestParse(t *testing.T) {
	tests := []struct {
		name, data, wantErr string
	}{
		// The examples of the specification, section 4.3 (quotes fixed).
		{"spec pci", `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:01:02.2","pf-pci-address":"0000:01:02.0"}}`, ""},
		{"spec vdpa", `{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa3","driver":"vhost","path":"/dev/vdpa-vhost0"}}`, ""},
		{"spec vhost-user", `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/var/run/vhost.sock"}}`, ""},
		{"memif", `{"type":"memif","version":"1.0.0","memif":{"role":"master","path":"/run/m.sock","mode":"ip"}}`, ""},
		{"later minor version with a new key", `{"type":"pci","version":"1.2.0","pci":{"pci-address":"x","new":"y"}}`, ""},
		{"not json", `{"type":`, "device info: unexpected end of JSON input"},
		{"no type", `{"version":"1.1.0"}`, `type "" is not one of`},
		{"unknown type", `{"type":"usb","version":"1.1.0"}`, `type "usb" is not one of`},
		{"no version", `{"type":"pci","pci":{"pci-address":"x"}}`, `version "" is not MAJOR.MINOR.PATCH`},
		{"bad version", `{"type":"pci","version":"1.1","pci":{"pci-address":"x"}}`, `version "1.1" is not MAJOR.MINOR.PATCH`},
		{"version 2", `{"type":"pci","version":"2.0.0","pci":{"pci-address":"x"}}`, "only major version 1"},
		{"pci without pci", `{"type":"pci","version":"1.1.0"}`, `type "pci" without its "pci" key`},
		{"vdpa without vdpa", `{"type":"vdpa","version":"1.1.0","pci":{"pci-address":"x"}}`, `type "vdpa" without its "vdpa" key`},
		{"vdpa without path", `{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"v","driver":"virtio"}}`, "vdpa.path is required"},
		{"vhost-user bad mode", `{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"both","path":"p"}}`, `vhost-user.mode "both"`},
		{"memif without memif", `{"type":"memif","version":"1.1.0"}`, `type "memif" without its "memif" key`},
		{"memif bad mode", `{"type":"memif","version":"1.1.0","memif":{"role":"slave","path":"p","mode":"l2"}}`, `memif.mode "l2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.data))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestReadNamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName("r/x", "d"))
	if _, err := ReadFile(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile of a missing file: %v, want fs.ErrNotExist", err)
	}
	if err := os.WriteFile(path, []byte(`{"type":"pci","version":"1.1.0"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := ReadFile(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadFile of a bad file: %v, want an error naming %s", err, path)
	}
}

func TestRemove(t *testing.T) {
	dir := t.TempDir()
	if err := Write(dir, "r/x", "d", NewPCI(PCI{PCIAddress: "a"})); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ { // the second time there is nothing to remove
		if err := Remove(dir, "r/x", "d"); err != nil {
			t.Fatalf("Remove #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, FileName("r/x", "d"))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("file still there: %v", err)
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	info := NewPCI(PCI{PCIAddress: "a"})
	for _, w := range []struct{ resource, id string }{
		{"intel.com/sriov-net", "0000:3b:02.0"},
		{"intel.com/sriov-net", "0000:3b:02.1"},
		{"intel.com/sriov", "0000:3e:02.0"},
	} {
		if err := Write(dir, w.resource, w.id, info); err != nil {
			t.Fatal(err)
		}
	}
	// What List must skip: a temporary file, a directory, other files.
	for _, name := range []string{".intel.com-sriov-0000:3b:02.5-device.json.123", "README", "-device.json", "x--device.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "a-b-device.json"), 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{Path: filepath.Join(dir, "intel.com-sriov-0000:3e:02.0-device.json"), Resource: "intel.com-sriov", DeviceID: "0000:3e:02.0"},
		{Path: filepath.Join(dir, "intel.com-sriov-net-0000:3b:02.0-device.json"), Resource: "intel.com-sriov-net", DeviceID: "0000:3b:02.0"},
		{Path: filepath.Join(dir, "intel.com-sriov-net-0000:3b:02.1-device.json"), Resource: "intel.com-sriov-net", DeviceID: "0000:3b:02.1"},
	}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("List =\n%+v\nwant\n%+v", files, want)
	}
	if !files[1].Belongs("intel.com/sriov-net") || files[1].Belongs("intel.com/sriov") || files[0].Belongs("intel.com/sriov-net") {
		t.Error("Belongs confuses intel.com/sriov and intel.com/sriov-net")
	}
	missing, err := List(filepath.Join(dir, "nope"))
	if err != nil || missing != nil {
		t.Errorf("List of a missing dir = %v, %v; want nothing", missing, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:01:02.2","pf-pci-address":"0000:01:02.0"}}`,
		`{"type":"vdpa","version":"1.1.0","vdpa":{"parent-device":"vdpa3","driver":"vhost","path":"/dev/vhost-vdpa-0"}}`,
		`{"type":"vhost-user","version":"1.1.0","vhost-user":{"mode":"server","path":"/var/run/vhost.sock"}}`,
		`{"type":"memif","version":"1.0.0","memif":{"role":"master","path":"/m","mode":"ip"}}`,
		`{"type":"pci","version":"01.1.0","pci":null}`,
		`null`, `[]`, `{"type":1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := Parse(data)
		if err != nil {
			return
		}
		// What Parse accepts, WriteFile writes and Parse reads back the same.
		path := filepath.Join(t.TempDir(), "f")
		if err := WriteFile(path, info); err != nil {
			t.Fatalf("WriteFile of parsed %s: %v", data, err)
		}
		again, err := ReadFile(path)
		if err != nil {
			t.Fatalf("ReadFile of written %s: %v", data, err)
		}
		if !reflect.DeepEqual(info, again) {
			t.Fatalf("round trip changed %+v into %+v", info, again)
		}
	})
}

func FuzzFileName(f *testing.F) {
	f.Add("intel.com/sriov-net", "0000:3b:02.0")
	f.Add("a", "b")
	f.Add("x/y/z", "-")
	f.Fuzz(func(t *testing.T, resource, id string) {
		name := FileName(resource, id)
		if strings.ContainsRune(name, '/') {
			t.Fatalf("FileName(%q, %q) = %q escapes its directory", resource, id, name)
		}
		got, ok := parseFileName(name)
		simple := resource != "" && !strings.HasPrefix(resource, ".") && id != "" && !strings.ContainsAny(id, "/-")
		if simple && (!ok || got.DeviceID != id || got.Resource != flatten(resource)) {
			t.Fatalf("parseFileName(%q) = %+v, %v; want resource %q, device %q", name, got, ok, resource, id)
		}
	})
}

// Copy hands the delegate the device plugin's file unchanged (device-info
// spec 1.1.0: the delegating plugin copies it to the CNI file it passes as
// CNIDeviceInfoFile); a missing or invalid source writes nothing.
func TestCopy(t *testing.T) {
	const res, dev = "intel.com/sriov_a", "0000:3b:02.0"
	valid := `{"type":"pci","version":"1.1.0","pci":{"pci-address":"0000:3b:02.0","pf-pci-address":"0000:3b:00.0"}}`
	tests := []struct {
		name, source, existing, wantErr string
	}{
		{"copied unchanged", valid, "", ""},
		{"longer earlier file truncated", valid, strings.Repeat(" ", 400), ""},
		{"no device plugin file", "", "", "no such file"},
		{"invalid device plugin file", `{"type":"pci","version":"9.0.0"}`, "", FileName(res, dev)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dpDir, cniDir := t.TempDir(), filepath.Join(t.TempDir(), "cni")
			if tt.source != "" {
				if err := os.WriteFile(filepath.Join(dpDir, FileName(res, dev)), []byte(tt.source), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dst := filepath.Join(cniDir, CNIFileName("ns/net", "c1", "net1"))
			if tt.existing != "" {
				os.MkdirAll(cniDir, 0o755)
				os.WriteFile(dst, []byte(tt.existing), 0o644)
			}
			info, err := Copy(dpDir, res, dev, dst)
			got, _ := os.ReadFile(dst)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || (tt.existing == "" && got != nil) {
					t.Fatalf("Copy = %v, file %q; want an error naming %q and no file", err, got, tt.wantErr)
				}
				return
			}
			if err != nil || string(got) != tt.source || info.PCI == nil || info.PCI.PCIAddress != dev {
				t.Fatalf("Copy = %+v, %v; file %q, want the source's bytes", info, err, got)
			}
		})
	}
}

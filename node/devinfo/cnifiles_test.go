package devinfo

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestParseCNIFileName: every split of a name CNIFileName could have made,
// and none of a name it never makes.
func TestParseCNIFileName(t *testing.T) {
	for _, tt := range []struct {
		name string
		want []CNIName
	}{
		{"ns-net-c1_net1", []CNIName{{"ns", "net-c1", "net1"}, {"ns-net", "c1", "net1"}}},
		{"ns-net-x-a_net1", []CNIName{{"ns", "net-x-a", "net1"}, {"ns-net", "x-a", "net1"}, {"ns-net-x", "a", "net1"}}},
		// '_' in the ID or the interface name: shortest interface first.
		{"n-a_b_c", []CNIName{{"n", "a_b", "c"}, {"n", "a", "b_c"}}},
		{"n-a*_net1", []CNIName{{"n", "a*", "net1"}}},
		{"n-c_" + strings.Repeat("i", 15), []CNIName{{"n", "c", strings.Repeat("i", 15)}}},
		{"n-c_" + strings.Repeat("i", 16), nil},
		{"n-c_", nil},
		{"-c_net1", nil},
		{"n-_net1", nil},
		{"nc_net1", nil},
		{".n-c_net1", nil},
		{"intel.com-sriov-0000:3b:02.0-device.json", nil},
	} {
		if got := ParseCNIFileName(tt.name); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseCNIFileName(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestCNIFiles: a container's files are those whose name has exactly its
// ID, not another's whose ID ends with it or that a glob of it matches,
// and not one that reads as a container with files there too.
func TestCNIFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{
		CNIFileName("ns/net", "a", "net1"),
		CNIFileName("ns/net", "a", "net2"),
		CNIFileName("ns/net", "x-a", "net1"),
		CNIFileName("ns/net", "ab", "net1"),
		CNIFileName("ns/net", "a_b", "net1"),
		CNIFileName("ns/net", "a*", "net1"),
		"." + CNIFileName("ns/net", "a", "net3") + ".tmp",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, CNIFileName("ns/net", "a", "dir")), 0o755); err != nil {
		t.Fatal(err)
	}
	hasFiles := func(ids ...string) func(string) bool {
		return func(id string) bool { return slices.Contains(ids, id) }
	}
	for _, tt := range []struct {
		id    string
		other func(string) bool
		want  []string
	}{
		{"a", hasFiles("x-a", "ab", "a_b", "a*"), []string{"ns-net-a_net1", "ns-net-a_net2"}},
		// Without knowing x-a has files, its name reads as a's too; a_b's
		// as a's on interface "b_net1".
		{"a", nil, []string{"ns-net-a_b_net1", "ns-net-a_net1", "ns-net-a_net2", "ns-net-x-a_net1"}},
		{"a*", hasFiles("a"), []string{"ns-net-a*_net1"}},
		// x-a's name reads as a's too: while a has files, it is neither's.
		{"x-a", hasFiles("a"), nil},
		{"x-a", hasFiles("ab"), []string{"ns-net-x-a_net1"}},
		{"net-a", hasFiles("a", "x-a"), nil},
		{"b", nil, nil},
	} {
		files, err := CNIFiles(dir, tt.id, tt.other)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, f := range files {
			if f.ContainerID != tt.id || f.Path != filepath.Join(dir, CNIFileName(f.Network, f.ContainerID, f.IfName)) {
				t.Errorf("CNIFiles(%q): %+v does not read back to its path", tt.id, f)
			}
			got = append(got, filepath.Base(f.Path))
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("CNIFiles(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
	if files, err := CNIFiles(filepath.Join(dir, "missing"), "a", nil); err != nil || files != nil {
		t.Errorf("CNIFiles of a missing dir = %v, %v; want nothing", files, err)
	}
}

// FuzzParseCNIFileName: a name CNIFileName makes of a network, container
// ID and interface name reads back as them, every reading of a name makes
// the name again, and so a container's files never go to another
// container that has files there.
func FuzzParseCNIFileName(f *testing.F) {
	f.Add("ns/net", "a", "net1", "x-a")
	f.Add("kube-system/sriov-net", "0123456789abcdef", "net1", "0123456789abcdef0")
	f.Add("ns/net", "a*", "eth0", "a")
	f.Add("default-net", "c_1", "net_1", "c")
	f.Add("n", "a-b", "n-1", "b")
	f.Fuzz(func(t *testing.T, network, id, ifName, otherID string) {
		name := CNIFileName(network, id, ifName)
		readings := ParseCNIFileName(name)
		for _, r := range readings {
			if again := CNIFileName(r.Network, r.ContainerID, r.IfName); again != name {
				t.Fatalf("reading %+v of %q makes %q", r, name, again)
			}
		}
		made := CNIName{Network: flatten(network), ContainerID: id, IfName: ifName}
		valid := network != "" && !strings.HasPrefix(network, ".") && id != "" && !strings.ContainsRune(id, '/') &&
			ifName != "" && len(ifName) <= maxIfName && !strings.ContainsRune(ifName, '/')
		if valid && !slices.Contains(readings, made) {
			t.Fatalf("ParseCNIFileName(%q) = %+v, without %+v", name, readings, made)
		}
		if _, ok := containerReading(name, otherID, func(s string) bool { return s == id }); valid && ok && otherID != id {
			t.Fatalf("%q, the file of %q, goes to %q, which knows %q has files", name, id, otherID, id)
		}
	})
}

package devinfo

import (
	"maps"
	"slices"
	"testing"
)

// TestCollectorFiles: the collector looks at the files of the resources
// it was given, whatever else shares the directory, and Held names every
// device with a file.
func TestCollectorFiles(t *testing.T) {
	dir := t.TempDir()
	info := NewPCI(PCI{PCIAddress: "0000:3b:02.0"})
	for _, f := range []struct{ res, dev string }{
		{"intel.com/a", "0000:3b:02.0"}, {"intel.com/a", "0000:3b:02.1"},
		{"intel.com/b", "0000:3b:02.2"}, {"example.com/other", "0000:3b:02.3"},
	} {
		if err := Write(dir, f.res, f.dev, info); err != nil {
			t.Fatal(err)
		}
	}
	c := &Collector{Dir: dir}
	c.Add("intel.com/a")
	c.Add("intel.com/b")
	c.Add("intel.com/a")
	byResource, err := c.files()
	if err != nil {
		t.Fatal(err)
	}
	for res, want := range map[string][]string{"intel.com/a": {"0000:3b:02.0", "0000:3b:02.1"}, "intel.com/b": {"0000:3b:02.2"}} {
		var got []string
		for _, f := range byResource[res] {
			got = append(got, f.DeviceID)
		}
		if slices.Sort(got); !slices.Equal(got, want) {
			t.Errorf("%s: files of %q, want %q", res, got, want)
		}
	}
	if len(byResource) != 2 {
		t.Errorf("files of %d resources, want 2", len(byResource))
	}
	held, err := Held(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(held)); len(got) != 4 {
		t.Errorf("Held %q, want the 4 devices with a file", got)
	}
}

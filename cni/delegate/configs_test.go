package delegate

import (
	"os"
	"path/filepath"
	"testing"
)

// A NAD's parsed configuration is reused until its text changes; a list
// a NAD finds on disk is looked up each time, since which file holds the
// name can change (NPWG 3.4.1). The default network's file is read each
// time and parsed again only when its text changed (NPWG 6.1).
func TestParsedConfigs(t *testing.T) {
	dir := t.TempDir()
	disk := filepath.Join(dir, "10-disk.conflist")
	write := func(version string) {
		if err := os.WriteFile(disk, []byte(`{"cniVersion":"`+version+`","name":"disk","plugins":[{"type":"macvlan"}]}`), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("0.4.0")
	p := newParsedConfigs(2)
	v1 := `{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"host-device"}]}`
	v2 := `{"cniVersion":"1.1.0","name":"a","plugins":[{"type":"host-device"}]}`

	first, err := p.resolve("ns", "a", v1, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := p.resolve("ns", "a", v1, dir, nil); again != first {
		t.Error("the same spec.config was parsed again")
	}
	if edited, _ := p.resolve("ns", "a", v2, dir, nil); edited == first || edited.CNIVersion != "1.1.0" {
		t.Errorf("an edited spec.config gave %+v, want its new version 1.1.0", edited)
	}
	if _, err := p.resolve("ns", "b", v1, dir, nil); err != nil {
		t.Fatal(err)
	}
	if len(p.lists) > 2 {
		t.Errorf("%d lists kept, bound 2", len(p.lists))
	}
	if _, err := p.resolve("ns", "bad", `{"cniVersion":"1.0.0"`, dir, nil); err == nil {
		t.Error("invalid spec.config accepted")
	}

	fromDisk, err := p.resolve("ns", "disk", "", dir, nil)
	if err != nil || fromDisk.CNIVersion != "0.4.0" {
		t.Fatalf("disk list = %+v, %v", fromDisk, err)
	}
	write("1.0.0")
	if reread, err := p.resolve("ns", "disk", "", dir, nil); err != nil || reread.CNIVersion != "1.0.0" {
		t.Errorf("disk list after an edit = %+v, %v; want version 1.0.0", reread, err)
	}

	loaded, err := p.loadFile(disk)
	if err != nil || loaded.CNIVersion != "1.0.0" {
		t.Fatalf("loadFile = %+v, %v", loaded, err)
	}
	if again, _ := p.loadFile(disk); again != loaded {
		t.Error("the same default network file was parsed again")
	}
	write("1.1.0")
	if edited, err := p.loadFile(disk); err != nil || edited.CNIVersion != "1.1.0" {
		t.Errorf("loadFile after an edit = %+v, %v; want version 1.1.0", edited, err)
	}
	if err := os.Remove(disk); err != nil {
		t.Fatal(err)
	}
	if _, err := p.loadFile(disk); err == nil {
		t.Error("loadFile of a removed file succeeded")
	}
}

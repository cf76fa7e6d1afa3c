package pools_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/hwdb"
	"github.com/hwnet-io/hwnet/node/pools"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

const layoutResources = `
resourceList:
  - {resourceName: a, selectors: {vendors: ["8086"]}}
`

// TestParseVFLayouts: a layout's PF selectors, VF count, eSwitch mode and
// driver ranges are read as written; the VFs no range names are the
// kernel's choice, and a layout without eswitchMode leaves the mode be.
func TestParseVFLayouts(t *testing.T) {
	cfg := mustParse(t, layoutResources+`
vfLayouts:
  - name: ib-dpdk
    selectors: {pfNames: [ibp65s0f0]}
    numVfs: 8
    eswitchMode: switchdev
    numSfs: 4
    drivers:
      - {vfs: "0-1", driver: vfio-pci}
      - {vfs: "5,7", driver: uio_pci_generic}
  - name: disabled
    selectors: [{rootDevices: ["0000:3e:00.0"]}]
    numVfs: 0
`)
	if len(cfg.VFLayouts) != 2 {
		t.Fatalf("%d layouts, want 2", len(cfg.VFLayouts))
	}
	l := cfg.VFLayouts[0]
	if l.Name != "ib-dpdk" || l.NumVFs != 8 || l.ESwitchMode != "switchdev" || l.NumSFs == nil || *l.NumSFs != 4 || l.Index != 0 || len(l.Selectors) != 1 || l.Selectors[0].PFNames[0].PF != "ibp65s0f0" {
		t.Errorf("layout 0: %+v", l)
	}
	want := []string{"vfio-pci", "vfio-pci", "", "", "", "uio_pci_generic", "", "uio_pci_generic"}
	for i, w := range want {
		if got := l.DriverOf(i); got != w {
			t.Errorf("DriverOf(%d) = %q, want %q", i, got, w)
		}
	}
	if off := cfg.VFLayouts[1]; off.NumVFs != 0 || off.Drivers != nil || off.ESwitchMode != "" || off.NumSFs != nil || off.Index != 1 {
		t.Errorf("layout 1: %+v", off)
	}
}

// TestParseVFLayoutErrors: every mistake in vfLayouts names its entry,
// field and value.
func TestParseVFLayoutErrors(t *testing.T) {
	for _, tc := range []struct {
		name, layouts string
		want          []string
	}{
		{"counts and names", `
  - {selectors: {pfNames: [p]}}
  - {name: "bad name", selectors: {pfNames: [p]}, numVfs: -1}
  - {name: big, selectors: {pfNames: [p]}, numVfs: 65536}
  - {name: big, selectors: {pfNames: [p]}, numVfs: "8"}
  - {name: frac, selectors: {pfNames: [p]}, numVfs: 1.5}`,
			[]string{
				`vfLayouts[0]: name: missing`,
				`vfLayouts[0]: numVfs: missing: want the PF's number of VFs`,
				`vfLayouts[1] "bad name": name: "bad name": want at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`,
				`vfLayouts[1] "bad name": numVfs: -1: want 0-65535`,
				`vfLayouts[2] "big": numVfs: 65536: want 0-65535`,
				`vfLayouts[3] "big": numVfs: "8": want a whole number`,
				`vfLayouts[3] "big": name: "big": declared twice`,
				`vfLayouts[3] "big": numVfs: missing: want the PF's number of VFs`,
				`vfLayouts[4] "frac": numVfs: 1.5: want a whole number`,
				`vfLayouts[4] "frac": numVfs: missing: want the PF's number of VFs`,
			}},
		{"selectors", `
  - {name: a, numVfs: 4}
  - {name: b, numVfs: 4, selectors: {pfNames: ["p#0-1"], rootDevices: ["0000:3b:00.0#2"]}}
  - {name: c, numVfs: 4, selectors: {isRdma: true}}`,
			[]string{
				`vfLayouts[0] "a": selectors: missing: want a selector object or a list of them`,
				`vfLayouts[1] "b": selectors.pfNames[0]: "p#0-1": names VFs: a layout selects PFs, give the PF alone`,
				`vfLayouts[1] "b": selectors.rootDevices[0]: "0000:3b:00.0#2": names VFs: a layout selects PFs, give the PF alone`,
				`vfLayouts[2] "c": selectors.isRdma: not a selector field of a vfLayouts entry`,
			}},
		{"driver ranges", `
  - name: a
    selectors: {pfNames: [p]}
    numVfs: 4
    drivers:
      - {vfs: "0-1", driver: vfio-pci}
      - {vfs: "1-2", driver: igb_uio}
      - {vfs: "3-4", driver: vfio-pci}
      - {vfs: "2-1", driver: "a/b"}
      - {driver: vfio-pci}
      - {vfs: "3", drv: x}`,
			[]string{
				`vfLayouts[0] "a": drivers[1].vfs: "1-2": VF 1 is already in drivers[0]`,
				`vfLayouts[0] "a": drivers[2].vfs: "3-4": VF 4 is beyond numVfs 4 (VFs 0-3)`,
				`vfLayouts[0] "a": drivers[3].driver: "a/b": not a driver name`,
				`vfLayouts[0] "a": drivers[3].vfs: "2-1": range 2-1 is reversed`,
				`vfLayouts[0] "a": drivers[4].vfs: missing: want VF indices such as "0-1" or "0,4-7"`,
				`vfLayouts[0] "a": drivers[5].drv: unknown field`,
				`vfLayouts[0] "a": drivers[5].driver: "": not a driver name`,
			}},
		{"eswitch mode", `
  - {name: a, selectors: {pfNames: [p]}, numVfs: 4, eswitchMode: offload}
  - {name: b, selectors: {pfNames: [p]}, numVfs: 4, eswitchMode: ""}
  - {name: c, selectors: {pfNames: [p]}, numVfs: 4, eswitchMode: Switchdev}
  - {name: d, selectors: {pfNames: [p]}, numVfs: 4, eswitchMode: 1}`,
			[]string{
				`vfLayouts[0] "a": eswitchMode: "offload": want "legacy" or "switchdev"`,
				`vfLayouts[1] "b": eswitchMode: "": want "legacy" or "switchdev"`,
				`vfLayouts[2] "c": eswitchMode: "Switchdev": want "legacy" or "switchdev"`,
				`vfLayouts[3] "d": eswitchMode: 1: want a string`,
			}},
		{"SF count", `
  - {name: a, selectors: {pfNames: [p]}, numVfs: 4, numSfs: -1}
  - {name: b, selectors: {pfNames: [p]}, numVfs: 4, numSfs: 70000}
  - {name: c, selectors: {pfNames: [p]}, numVfs: 4, numSfs: 2, eswitchMode: legacy}
  - {name: d, selectors: {pfNames: [p]}, numVfs: 4, numSfs: "2"}
  - {name: e, selectors: {pfNames: [p]}, numVfs: 4, numSfs: 0, eswitchMode: legacy}`,
			[]string{
				`vfLayouts[0] "a": numSfs: -1: want 0-65536`,
				`vfLayouts[1] "b": numSfs: 70000: want 0-65536`,
				`vfLayouts[2] "c": numSfs: 2: SFs are ports of the switchdev eSwitch, and eswitchMode is legacy`,
				`vfLayouts[3] "d": numSfs: "2": want a whole number`,
			}},
		{"not a list", `
  name: a`,
			[]string{`vfLayouts: {"name":"a"}: want a list`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := pools.Parse([]byte(layoutResources + "vfLayouts:" + tc.layouts))
			if err == nil {
				t.Fatalf("no error; config %+v", cfg)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestLayouts: each PF gets the first layout that selects it, by the
// selectors pools use (names, addresses, IDs, drivers, tags); a second
// match is a warning, a count beyond sriov_totalvfs makes the layout
// Unfit.
func TestLayouts(t *testing.T) {
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv := discoverNode(t, db, virtualnode.DefaultSpec(), nil)
	cfg := mustParse(t, layoutResources+`
tags:
  - {name: second, selectors: {rootDevices: ["0000:3e:00.0"]}}
vfLayouts:
  - {name: ib, selectors: {pfNames: [ibp65s0f0]}, numVfs: 8, drivers: [{vfs: "0-1", driver: vfio-pci}]}
  - {name: by-tag, selectors: {tags: [second]}, numVfs: 300}
  - {name: ice, selectors: {vendors: ["8086"], drivers: [ice]}, numVfs: 2}
`)
	got, warnings := cfg.Layouts(inv)
	var names []string
	for _, l := range got {
		names = append(names, strings.TrimSpace(l.PF+" "+l.PFName+" "+l.Layout.Name+" "+l.Unfit()))
	}
	want := []string{"0000:3b:00.0 enp59s0f0 ice",
		`0000:3e:00.0 enp62s0f0 by-tag vfLayouts[1] "by-tag": numVfs 300 is more than PF 0000:3e:00.0 has (sriov_totalvfs 256)`,
		"0000:41:00.0 ibp65s0f0 ib"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("layouts\n%s\nwant\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	wantWarnings := []string{
		`PF 0000:3e:00.0 is matched by vfLayouts[2] "ice" too; vfLayouts[1] "by-tag" applies`,
	}
	if !reflect.DeepEqual(warnings, wantWarnings) {
		t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(warnings, "\n"), strings.Join(wantWarnings, "\n"))
	}
}

// TestUnfitSFs: a layout counting SFs does not fit a PF that is not on
// mlx5_core, one in legacy mode that the layout does not bring to
// switchdev, or one whose model carries fewer (or the hardware database
// does not know); a count of 0, or none, fits any PF.
func TestUnfitSFs(t *testing.T) {
	const entry = `vfLayouts[0] "l": `
	for _, tt := range []struct {
		name, driver, now, mode, model string
		num                            *int
		want                           string
	}{
		{"in switchdev", "mlx5_core", "switchdev", "", "ConnectX-6 Dx", new(252), ""},
		{"brought to switchdev", "mlx5_core", "legacy", "switchdev", "ConnectX-6 Dx", new(2), ""},
		{"none asked", "ice", "legacy", "", "E810-C", new(0), ""},
		{"left be", "ice", "legacy", "", "E810-C", nil, ""},
		{"not mlx5", "ice", "switchdev", "switchdev", "E810-C", new(2),
			entry + `numSfs 2: PF 0000:3b:00.0 is on "ice", and hwnet adds SFs only to mlx5_core PFs`},
		{"legacy", "mlx5_core", "legacy", "", "ConnectX-6 Dx", new(2),
			entry + `numSfs 2: PF 0000:3b:00.0's eSwitch is in legacy mode, and SFs are ports of the switchdev eSwitch (declare eswitchMode: switchdev)`},
		{"beyond maxSFs", "mlx5_core", "switchdev", "", "ConnectX-6 Dx", new(253),
			entry + `numSfs 253 is more than PF 0000:3b:00.0's model ConnectX-6 Dx carries (hardware database maxSFs 252)`},
		{"unknown model", "mlx5_core", "switchdev", "", "", new(1),
			entry + `numSfs 1: PF 0000:3b:00.0's model is not in the hardware database, which says how many SFs a model carries (add it with --hwdb, maxSFs)`},
	} {
		maxSFs := map[string]int{"ConnectX-6 Dx": 252}[tt.model]
		l := pools.PFLayout{PF: "0000:3b:00.0", TotalVFs: 8, Model: tt.model, Switchdev: true, Driver: tt.driver, ESwitchMode: tt.now,
			MaxSFs: maxSFs, Layout: &pools.VFLayout{Name: "l", NumVFs: 4, ESwitchMode: tt.mode, NumSFs: tt.num}}
		if got := l.Unfit(); got != tt.want {
			t.Errorf("%s: Unfit() = %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

// TestLayoutsSFs: a PF's layout carries its driver, its eSwitch mode now
// and its model's maxSFs, from the inventory: the default virtual node's
// ConnectX-6 Dx (as the e2e node has it) carries 252 SFs, an E810-C none.
func TestLayoutsSFs(t *testing.T) {
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	spec := virtualnode.DefaultSpec()
	spec.PFs = append(spec.PFs, virtualnode.PFSpec{Model: "ConnectX-6 Dx", SFs: 2, Names: []string{"p2"}})
	inv := discoverNode(t, db, spec, nil)
	cfg := mustParse(t, layoutResources+`
vfLayouts:
  - {name: all, selectors: {pfNames: [p2, enp59s0f0]}, numVfs: 2}
`)
	got, _ := cfg.Layouts(inv)
	var seen []string
	for _, l := range got {
		seen = append(seen, fmt.Sprintf("%s %s %s %d", l.PFName, l.Driver, l.ESwitchMode, l.MaxSFs))
	}
	if want := []string{"enp59s0f0 ice legacy 0", "p2 mlx5_core legacy 252"}; !reflect.DeepEqual(seen, want) {
		t.Errorf("layouts %q, want %q", seen, want)
	}
}

// TestLayoutsSwitchdev: each PF's layout carries its model and whether
// the model can take switchdev, from the inventory (every model of the
// default virtual node can).
func TestLayoutsSwitchdev(t *testing.T) {
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	inv := discoverNode(t, db, virtualnode.DefaultSpec(), nil)
	cfg := mustParse(t, layoutResources+`
vfLayouts:
  - {name: all, selectors: {vendors: ["8086", "15b3"]}, numVfs: 2, eswitchMode: switchdev}
`)
	got, _ := cfg.Layouts(inv)
	if len(got) != 3 {
		t.Fatalf("%d layouts, want 3", len(got))
	}
	for _, l := range got {
		if l.Model == "" || !l.Switchdev || l.Unfit() != "" {
			t.Errorf("PF %s: model %q, switchdev %t, unfit %q; want its model, switchdev, fit", l.PF, l.Model, l.Switchdev, l.Unfit())
		}
	}
}

// TestUnfitSwitchdev: a layout asking for switchdev does not fit a PF
// whose model cannot take it, or that the hardware database does not
// know; legacy, or no mode, fits any.
func TestUnfitSwitchdev(t *testing.T) {
	for _, tt := range []struct {
		name, model, mode string
		switchdev         bool
		want              string
	}{
		{"capable", "ConnectX-6", "switchdev", true, ""},
		{"not capable", "X710", "switchdev", false,
			`vfLayouts[0] "l": eswitchMode switchdev: PF 0000:3b:00.0's model X710 cannot take switchdev mode (hardware database)`},
		{"unknown model", "", "switchdev", false,
			`vfLayouts[0] "l": eswitchMode switchdev: PF 0000:3b:00.0's model is not in the hardware database, which says which models can take switchdev mode (add it with --hwdb, switchdev: true)`},
		{"legacy", "X710", "legacy", false, ""},
		{"left be", "X710", "", false, ""},
	} {
		l := pools.PFLayout{PF: "0000:3b:00.0", TotalVFs: 8, Model: tt.model, Switchdev: tt.switchdev,
			Layout: &pools.VFLayout{Name: "l", NumVFs: 4, ESwitchMode: tt.mode}}
		if got := l.Unfit(); got != tt.want {
			t.Errorf("%s: Unfit() = %q\nwant %q", tt.name, got, tt.want)
		}
	}
}

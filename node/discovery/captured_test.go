package discovery_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	capturefmt "github.com/hwnet-io/hwnet/api/capture"
	"github.com/hwnet-io/hwnet/node/capture"
	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// TestCapturedLayouts: each node captured into testdata/captures (by
// `hwnetctl capture take`: a user's NIC, contributed as docs/hardware.md
// says) discovers as its inventory beside it, NAME.inventory.json.
// HWNET_UPDATE_CAPTURES=1 writes the inventories of new captures.
func TestCapturedLayouts(t *testing.T) {
	files, err := filepath.Glob("testdata/captures/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var captures []string
	for _, f := range files {
		if !strings.HasSuffix(f, ".inventory.json") {
			captures = append(captures, f)
		}
	}
	if len(captures) == 0 {
		t.Fatal("no captures in testdata/captures")
	}
	db := vnodetest.OpenDB(t)
	for _, file := range captures {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c, err := capturefmt.Load(file)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := capture.Unpack(c, dir); err != nil {
				t.Fatal(err)
			}
			inv, err := discovery.Discover(context.Background(), discovery.Options{SysfsRoot: filepath.Join(dir, "sys"),
				DevRoot: filepath.Join(dir, "dev"), DB: db, ESwitch: vnodetest.NoESwitch{}, VDPA: vnodetest.VDPA{}})
			if err != nil {
				t.Fatal(err)
			}
			inv.LinkFacts = "" // names the temporary directory
			got, err := json.MarshalIndent(inv, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			got = []byte(strings.ReplaceAll(string(got), dir, "CAPTURE") + "\n")
			golden := strings.TrimSuffix(file, ".json") + ".inventory.json"
			if os.Getenv("HWNET_UPDATE_CAPTURES") == "1" {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (HWNET_UPDATE_CAPTURES=1 writes it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("%s discovers as\n%s\nwant (%s)\n%s", file, got, golden, want)
			}
		})
	}
}

package pools

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/hwdb"
)

const (
	goodConfig  = "resourceList:\n  - resourceName: sriov_net\n    selectors: {drivers: [iavf]}\n"
	otherConfig = "resourceList:\n  - resourceName: other\n    selectors: {drivers: [iavf]}\n"
	badConfig   = "resourceList:\n  - resourceName: sriov_net\n    bogus: 1\n"
)

// TestStartConfig: a valid file is served and kept; an invalid one falls
// back to the last good copy, saying why, and without a copy it is an
// error.
func TestStartConfig(t *testing.T) {
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name           string
		file, lastGood string // "" writes no file
		keep           bool   // a last good path is given
		want           string // the resource served; "" an error
		rejected       bool
		kept           string // the last good copy's content after
	}{
		{"valid", goodConfig, "", true, "sriov_net", false, goodConfig},
		{"valid replaces the copy", goodConfig, otherConfig, true, "sriov_net", false, goodConfig},
		{"valid, no copy kept", goodConfig, "", false, "sriov_net", false, ""},
		{"invalid, copy served", badConfig, otherConfig, true, "other", true, otherConfig},
		{"invalid, no copy", badConfig, "", true, "", false, ""},
		{"invalid, copies off", badConfig, "", false, "", false, ""},
		{"missing, copy served", "", otherConfig, true, "other", true, otherConfig},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file, lastGood := filepath.Join(dir, "config.yaml"), ""
			writeIf(t, file, tt.file)
			if tt.keep {
				lastGood = filepath.Join(dir, "last-good")
				writeIf(t, lastGood, tt.lastGood)
			}
			cfg, rejected, err := StartConfig(file, lastGood, db)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("StartConfig: %v, want an error", cfg)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Resources[0].Name; got != tt.want || (rejected != nil) != tt.rejected {
				t.Errorf("serves %s, rejected %v; want %s, rejected %t", got, rejected, tt.want, tt.rejected)
			}
			if kept, _ := os.ReadFile(lastGood); tt.keep && string(kept) != tt.kept {
				t.Errorf("last good copy %q, want %q", kept, tt.kept)
			}
		})
	}
}

func writeIf(t *testing.T, path, content string) {
	t.Helper()
	if content == "" {
		return
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReadCheckedNamesTheFile: a rejection says which file.
func TestReadCheckedNamesTheFile(t *testing.T) {
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	writeIf(t, path, badConfig)
	if _, _, err := ReadChecked(path, db); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("ReadChecked: %v, want an error naming %s", err, path)
	}
}

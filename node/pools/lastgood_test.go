package pools

import (
	"crypto/sha256"
	"encoding/hex"
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
// error. A valid file whose copy cannot be written is served all the same
// (a DaemonSet's unwritable /var/lib/hwnet was a crash loop with every
// pool at 0), saying why it is not kept. The configuration served names
// the SHA-256 of the file it came from.
func TestStartConfig(t *testing.T) {
	db, err := hwdb.Open()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name           string
		file, lastGood string // "" writes no file
		keep           bool   // a last good path is given
		unwritable     bool   // the last good path's parent is a file
		want           string // the resource served; "" an error
		rejected       bool
		kept           string // the last good copy's content after
		unkept         bool
	}{
		{"valid", goodConfig, "", true, false, "sriov_net", false, goodConfig, false},
		{"valid replaces the copy", goodConfig, otherConfig, true, false, "sriov_net", false, goodConfig, false},
		{"valid, no copy kept", goodConfig, "", false, false, "sriov_net", false, "", false},
		{"valid, copy cannot be written", goodConfig, "", true, true, "sriov_net", false, "", true},
		{"invalid, copy served", badConfig, otherConfig, true, false, "other", true, otherConfig, false},
		{"invalid, no copy", badConfig, "", true, false, "", false, "", false},
		{"invalid, copies off", badConfig, "", false, false, "", false, "", false},
		{"missing, copy served", "", otherConfig, true, false, "other", true, otherConfig, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file, lastGood := filepath.Join(dir, "config.yaml"), ""
			writeIf(t, file, tt.file)
			if tt.keep {
				lastGood = filepath.Join(dir, "last-good")
				if tt.unwritable {
					lastGood = filepath.Join(file, "last-good")
				}
				writeIf(t, lastGood, tt.lastGood)
			}
			st, err := StartConfig(file, lastGood, db)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("StartConfig: %v, want an error", st.Config)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Config.Resources[0].Name; got != tt.want || (st.Rejected != nil) != tt.rejected {
				t.Errorf("serves %s, rejected %v; want %s, rejected %t", got, st.Rejected, tt.want, tt.rejected)
			}
			served := tt.file
			if tt.rejected {
				served = tt.lastGood
			}
			if sum := sha256.Sum256([]byte(served)); st.Config.SHA256 != hex.EncodeToString(sum[:]) {
				t.Errorf("SHA256 %q, want the served file's %x", st.Config.SHA256, sum)
			}
			if (st.Unkept != nil) != tt.unkept {
				t.Errorf("unkept %v, want an error %t", st.Unkept, tt.unkept)
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

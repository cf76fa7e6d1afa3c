package ctl_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCapture: a node taken into a file and unpacked into a directory is
// the same node to hwnetctl inventory, but for the identifiers scrubbed;
// mistakes in the command line are usage errors, a bad file is named.
func TestCapture(t *testing.T) {
	node := treeNode(t)
	file := filepath.Join(t.TempDir(), "node.json")
	code, out, errOut := run(t, "capture", "take", "-o", file, "--sysfs", node.SysRoot(), "--dev", node.DevRoot())
	if code != 0 || !strings.Contains(out, "identifiers replaced") {
		t.Fatalf("take: exit %d\n%s%s", code, out, errOut)
	}
	dir := filepath.Join(t.TempDir(), "unpacked")
	if code, out, errOut := run(t, "capture", "unpack", "--dir", dir, file); code != 0 || !strings.Contains(out, "hwnetctl inventory --sysfs "+dir+"/sys") {
		t.Fatalf("unpack: exit %d\n%s%s", code, out, errOut)
	}
	want := pfRows(t, mustRun(t, inventoryArgs(node)...))
	got := pfRows(t, mustRun(t, "inventory", "--sysfs", filepath.Join(dir, "sys"), "--dev", filepath.Join(dir, "dev")))
	if got != want || want == "" {
		t.Errorf("the unpacked node's PFs:\n%s\nwant\n%s", got, want)
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"version": 1, "capture": {"entries": [{"path": "sys/x", "kind": "link", "target": "../../etc"}]}}`), 0o644)
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"capture"}, 2, "want a subcommand: take or unpack"},
		{[]string{"capture", "take"}, 2, "-o FILE is required"},
		{[]string{"capture", "unpack", file}, 2, "--dir DIR is required"},
		{[]string{"capture", "unpack", "--dir", dir, file}, 1, "is not empty"},
		{[]string{"capture", "unpack", "--dir", filepath.Join(t.TempDir(), "x"), bad}, 1, `entries[0] "sys/x": target "../../etc"`},
		{[]string{"capture", "shoot"}, 2, `unknown subcommand "shoot"`},
	} {
		if code, _, errOut := run(t, tt.args...); code != tt.code || !strings.Contains(errOut, tt.want) {
			t.Errorf("hwnetctl %q: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.code, tt.want)
		}
	}
}

// pfRows are the inventory table's PF lines.
func pfRows(t *testing.T, table string) string {
	t.Helper()
	var rows []string
	for line := range strings.SplitSeq(table, "\n") {
		if strings.HasPrefix(line, "0000:") {
			rows = append(rows, line)
		}
	}
	return strings.Join(rows, "\n")
}

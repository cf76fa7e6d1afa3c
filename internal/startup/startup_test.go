package startup

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

func TestReadOnlyMapping(t *testing.T) {
	const exe = "/usr/bin/hwnet-agent"
	for _, tt := range []struct {
		name, line string
		ok         bool
		start, end uint64
	}{
		{"code", "00400000-01f85000 r-xp 00000000 fe:00 10010717    /usr/bin/hwnet-agent", true, 0x400000, 0x1f85000},
		{"read-only data", "01f85000-04232000 r--p 01b85000 fe:00 10010717    /usr/bin/hwnet-agent", true, 0x1f85000, 0x4232000},
		{"writable data", "04232000-04304000 rw-p 03e32000 fe:00 10010717    /usr/bin/hwnet-agent", false, 0, 0},
		{"another file", "7f00-8f00 r-xp 00000000 fe:00 1 /usr/lib/libc.so.6", false, 0, 0},
		{"anonymous", "ab092400000-ab093000000 rw-p 00000000 00:00 0", false, 0, 0},
		{"path with a space", "1000-2000 r-xp 0 fe:00 5 /opt/my dir/hwnet-agent", false, 0, 0},
		{"bad range", "zz-2000 r-xp 0 fe:00 5 /usr/bin/hwnet-agent", false, 0, 0},
		{"empty range", "2000-2000 r-xp 0 fe:00 5 /usr/bin/hwnet-agent", false, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			start, end, ok := readOnlyMapping(tt.line, exe)
			if ok != tt.ok || start != tt.start || end != tt.end {
				t.Errorf("readOnlyMapping(%q) = %#x, %#x, %v; want %#x, %#x, %v", tt.line, start, end, ok, tt.start, tt.end, tt.ok)
			}
		})
	}
	if _, _, ok := readOnlyMapping("1000-2000 r-xp 0 fe:00 5 /opt/my dir/hwnet-agent", "/opt/my dir/hwnet-agent"); !ok {
		t.Error("a path with a space is not matched")
	}
}

// TestReleaseExecutablePages: the test binary's read-only pages leave its
// resident set, and it goes on running.
func TestReleaseExecutablePages(t *testing.T) {
	before := rssFileKB(t)
	released, err := ReleaseExecutablePages()
	if err != nil {
		t.Fatal(err)
	}
	if released == 0 {
		t.Fatal("no mapping of the executable released")
	}
	if after := rssFileKB(t); after >= before {
		t.Errorf("file-backed RSS %d kB after release, was %d kB", after, before)
	}
}

func rssFileKB(t *testing.T) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

package startup

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
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

// TestReleaseDropsCachedExecutable: after the release the kernel caches
// few of the executable's pages that the agent does not map. A fault maps
// the cached pages around the one it needs, and a large folio whole: an
// earlier run of the same binary, or a read of it, left it cached. The
// test runs in a copy of its binary written just before, as a build or a
// package leaves one, whose cached pages are dirty: the kernel drops none
// of those until they are written back.
func TestReleaseDropsCachedExecutable(t *testing.T) {
	if os.Getenv(freshCopyEnv) == "" {
		runInFreshCopy(t, "TestReleaseDropsCachedExecutable")
		return
	}
	// Written just now, the copy is cached whole.
	before := countExecutablePages(t)
	if before.cached < before.all/4 {
		t.Skipf("skip-ok: %d of the executable's %d mapped pages cached: nothing to drop", before.cached, before.all)
	}
	if _, err := ReleaseExecutablePages(); err != nil {
		t.Fatal(err)
	}
	// Not all: a large folio stays cached whole while one of its pages is
	// mapped (a third of before on Linux 6.18, ext4).
	if after := countExecutablePages(t); after.unmapped > before.cached/2 {
		t.Errorf("%d of the executable's %d mapped pages cached and not faulted in after the release, %d cached before", after.unmapped, after.all, before.cached)
	}
}

// TestReleaseWhileWrittenBack: the release gives back the pages of an
// executable whose file the kernel is writing back, as it does for up to
// 30 s after a build or a package wrote it; the kernel pages out no page
// under writeback.
func TestReleaseWhileWrittenBack(t *testing.T) {
	if os.Getenv(freshCopyEnv) == "" {
		runInFreshCopy(t, "TestReleaseWhileWrittenBack")
		return
	}
	exe, err := os.Open("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	defer exe.Close()
	before := countExecutablePages(t)
	if err := unix.SyncFileRange(int(exe.Fd()), 0, 0, unix.SYNC_FILE_RANGE_WRITE); err != nil {
		t.Fatal(err)
	}
	if _, err := ReleaseExecutablePages(); err != nil {
		t.Fatal(err)
	}
	// What the test runs after the release faults back in: 322-399 of
	// 734 pages here. With the writeback running, every page stayed.
	if after := countExecutablePages(t); after.mapped > before.mapped*2/3 {
		t.Errorf("%d of the executable's %d pages mapped after the release, %d before", after.mapped, after.all, before.mapped)
	}
}

// freshCopyEnv tells a test it runs in runInFreshCopy's copy.
const freshCopyEnv = "HWNET_STARTUP_FRESH_COPY"

// runInFreshCopy writes a copy of the test binary and runs test in it,
// failing t with the copy's output if the test fails there.
func runInFreshCopy(t *testing.T, test string) {
	t.Helper()
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type == unix.TMPFS_MAGIC {
		t.Skipf("skip-ok: %s is on tmpfs, whose page cache is the file itself", dir)
	}
	copyPath := filepath.Join(dir, "startup.test")
	if err := os.WriteFile(copyPath, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), copyPath, "-test.run=^"+test+"$", "-test.v")
	cmd.Env = append(os.Environ(), freshCopyEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s in a fresh copy of the test binary: %v\n%s", test, err, out)
	}
	if bytes.Contains(out, []byte("--- SKIP")) {
		t.Skipf("skip-ok: skipped in a fresh copy of the test binary:\n%s", out)
	}
}

// executablePages counts the pages of the executable's read-only
// mappings.
type executablePages struct {
	cached   int // in the page cache
	unmapped int // in the page cache, not faulted in by this process
	mapped   int // faulted in by this process
	all      int
}

func countExecutablePages(t *testing.T) executablePages {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		t.Fatal(err)
	}
	defer pagemap.Close()
	var c executablePages
	for line := range strings.Lines(string(maps)) {
		start, end, ok := readOnlyMapping(line, exe)
		if !ok {
			continue
		}
		n := int(end-start) / os.Getpagesize()
		resident := make([]byte, n)
		if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(start), uintptr(end-start), uintptr(unsafe.Pointer(&resident[0]))); errno != 0 {
			t.Fatalf("mincore %x-%x: %v", start, end, errno)
		}
		entries := make([]byte, 8*n)
		if _, err := pagemap.ReadAt(entries, int64(start)/int64(os.Getpagesize())*8); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			present := binary.LittleEndian.Uint64(entries[8*i:])>>63 == 1
			if present {
				c.mapped++
			}
			if resident[i]&1 == 1 {
				c.cached++
				if !present {
					c.unmapped++
				}
			}
		}
		c.all += n
	}
	return c
}

func rssFileKB(t *testing.T) int {
	t.Helper()
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(status)) {
		if v, ok := strings.CutPrefix(line, "RssFile:"); ok {
			return kbOf(t, v)
		}
	}
	t.Fatal("no RssFile in /proc/self/status")
	return 0
}

// TestAdvisedPagesFaultBackSingly: a page of a mapping given back is
// read back alone when touched again. Without MADV_RANDOM a kernel with
// large page-cache folios (Linux 6.18 on ext4 here) reads around each
// fault and maps whole folios: 52 touches 1 MiB apart mapped 23.5 MB of
// the agent's binary, where their pages are 208 kB.
func TestAdvisedPagesFaultBackSingly(t *testing.T) {
	const stride, touches = 1 << 20, 32
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, bytes.Repeat([]byte{1}, stride*touches), 0o644); err != nil {
		t.Fatal(err)
	}
	plain, advised := mapFile(t, path), mapFile(t, path)
	if err := advise(addrOf(advised), addrOf(advised)+uint64(len(advised))); err != nil {
		t.Fatal(err)
	}
	// Up to 16 cached neighbours of a page may be mapped with it. The
	// advised mapping is touched first, and the plain one half a stride
	// further: the pages a mapping holds stay cached for the other.
	const most = touches * 64
	got := touchedKB(t, path, advised, 0, stride)
	if plain := touchedKB(t, path, plain, stride/2, stride); plain <= most {
		t.Skipf("skip-ok: this kernel maps %d kB for %d touches of a file it does not cache: no read-around to keep out", plain, touches)
	}
	if got > most {
		t.Errorf("%d touches of an advised mapping brought back %d kB, want at most %d", touches, got, most)
	}
}

func mapFile(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Munmap(b) })
	return b
}

// touchedKB drops the file's cached pages, reads a byte of m every stride
// bytes from from, and returns how much of m is resident then.
func touchedKB(t *testing.T, path string, m []byte, from, stride int) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
	var sum byte
	for off := from; off < len(m); off += stride {
		sum += m[off]
	}
	if sum == 0 {
		t.Fatal("read zeros from a file of ones")
	}
	return mappingRSSKB(t, addrOf(m))
}

// addrOf is the address a mapping starts at.
func addrOf(m []byte) uint64 { return uint64(uintptr(unsafe.Pointer(&m[0]))) }

// mappingRSSKB is the resident size of the mapping that starts at start.
func mappingRSSKB(t *testing.T, start uint64) int {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	head := strconv.FormatUint(start, 16) + "-"
	in := false
	for line := range strings.Lines(string(smaps)) {
		switch {
		case strings.HasPrefix(line, head):
			in = true
		case in && strings.HasPrefix(line, "Rss:"):
			return kbOf(t, strings.TrimPrefix(line, "Rss:"))
		}
	}
	t.Fatalf("no mapping at %#x in /proc/self/smaps", start)
	return 0
}

// kbOf reads a /proc size field's value, "  1234 kB".
func kbOf(t *testing.T, v string) int {
	t.Helper()
	kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
	if err != nil {
		t.Fatal(err)
	}
	return kb
}

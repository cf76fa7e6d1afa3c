// Package startup is what a long-running hwnet binary does once its
// start-up is over: it gives the kernel back the memory only start-up used.
package startup

import (
	"bufio"
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ReleasePages asks the kernel to reclaim the pages of the agent's
// executable that are mapped read-only (code, read-only data, the symbol
// table), once start-up is over. Initialising the ~900 packages of a
// client-go binary touches some 25-35 MB of them once; the kernel would
// keep them resident and charged to the agent for good. What the agent
// still runs faults back in, a page at a time (MADV_RANDOM): a kernel
// with large page-cache folios reads around each fault into folios of up
// to hundreds of kilobytes and maps them whole, so the pages given back
// came back with their neighbours (52 touches 1 MiB apart mapped 23.5 MB
// on Linux 6.18, against 208 kB). Measured in test/bench/peers at 2048
// VFs: the binary's resident pages after the DRA prepares 11.8 MiB
// against 19.0-19.1, with no prepare, ADD or Allocate slower.
// It logs what it did on log rather than failing: the pages are an
// economy, not something serving needs.
func ReleasePages(log *slog.Logger) {
	released, err := ReleaseExecutablePages()
	if err != nil {
		log.Warn("start-up pages of the executable not released", "err", err)
		return
	}
	log.Debug("start-up pages of the executable released", "bytes", released)
}

// ReleaseExecutablePages writes the running executable's file back,
// advises MADV_PAGEOUT, then MADV_RANDOM, on every read-only mapping of
// it, drops its pages that stay cached unmapped, and returns the bytes of
// address space it advised. Writable mappings are left alone: their
// changed pages are the program's data.
//
// The kernel neither pages out nor drops a page under writeback, and an
// executable written shortly before it runs (a build, a package, a copy
// onto the host) is written back up to 30 s later. Started right after
// its build (test/bench/peers -parts cni, before the bench wrote its
// binaries back), the agent's binary pages with 100 pods attached were
// 20.0, 22.6 and 24.2 MiB, and 14.3, 14.9 and 17.5 with the file written
// back first. Writing back a clean file does nothing; a file of an
// overlayfs lower layer (an image's) is not written back through its
// overlay.
func ReleaseExecutablePages() (uint64, error) {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("executable: %w", err)
	}
	defer f.Close()
	// The pages written and waited for, with no journal commit or disk
	// cache flush (fdatasync's): the release needs them clean, not
	// durable. A flush under the bench's I/O delayed the release past
	// its rows taken at registration.
	const writeBack = unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WRITE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	if err := unix.SyncFileRange(int(f.Fd()), 0, 0, writeBack); err != nil {
		return 0, fmt.Errorf("writeback of the executable: %w", err)
	}
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("executable: %w", err)
	}
	total, err := adviseMappings(exe)
	if err != nil {
		return total, err
	}
	return total, dropCached(f)
}

// adviseMappings advises every read-only mapping of exe and returns the
// bytes of address space it advised.
func adviseMappings(exe string) (uint64, error) {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, fmt.Errorf("mappings: %w", err)
	}
	var total uint64
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		start, end, ok := readOnlyMapping(sc.Text(), exe)
		if !ok {
			continue
		}
		if err := advise(start, end); err != nil {
			return total, err
		}
		total += end - start
	}
	return total, sc.Err()
}

// dropCached has the kernel drop the executable's cached pages that no
// process maps. An earlier run of the same binary (the agent before a
// restart or an upgrade, another part of a bench) leaves it cached in
// large folios, and a fault maps the cached pages around the one it needs
// and a large folio whole, MADV_RANDOM or not. Measured in
// test/bench/peers (-parts cni, the binary read whole before each run):
// its pages with 100 pods attached 19.3 and 20.4 MiB, against 21.5 and
// 21.9 without the drop. Pages another process maps stay cached.
func dropCached(exe *os.File) error {
	if err := unix.Fadvise(int(exe.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("fadvise POSIX_FADV_DONTNEED on the executable: %w", err)
	}
	return nil
}

// advise gives the pages of start-end back and has the ones touched again
// fault back singly.
func advise(start, end uint64) error {
	for _, a := range []struct {
		name   string
		advice int
	}{{"MADV_PAGEOUT", unix.MADV_PAGEOUT}, {"MADV_RANDOM", unix.MADV_RANDOM}} {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, uintptr(start), uintptr(end-start), uintptr(a.advice)); errno != 0 {
			return fmt.Errorf("madvise %s %x-%x: %w", a.name, start, end, errno)
		}
	}
	return nil
}

// readOnlyMapping parses one line of /proc/self/maps ("start-end perms
// offset dev inode path") and says whether it maps path without write
// permission.
func readOnlyMapping(line, path string) (start, end uint64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 6 || strings.Join(f[5:], " ") != path || len(f[1]) < 2 || f[1][1] != '-' {
		return 0, 0, false
	}
	lo, hi, found := strings.Cut(f[0], "-")
	if !found {
		return 0, 0, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return 0, 0, false
	}
	return start, end, true
}

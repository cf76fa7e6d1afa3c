package peers

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/osthread"
	"github.com/hwnet-io/hwnet/node/virtualnode"
)

// proc is a daemon the benchmark started and stops.
type proc struct {
	name    string
	cmd     *exec.Cmd
	log     string
	started time.Time
	// exited is closed once the process ended, with err its Wait's.
	exited chan struct{}
	err    error
}

// mount is a mount made in the daemon's private mount namespace before it
// starts: a tmpfs when src is "", else a bind of src.
type mount struct{ src, dst string }

// startIn starts the command inside the node (its sysfs tree on /sys, its
// netns), after the mounts, with stdout and stderr to a log file. The
// clock starts just before the exec.
func startIn(tb testing.TB, node *virtualnode.Node, name string, mounts []mount, args ...string) *proc {
	tb.Helper()
	logf, err := os.CreateTemp("", "peers-"+name+"-*.log")
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	p := &proc{name: name, cmd: exec.Command(args[0], args[1:]...), log: logf.Name(), exited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = runIn(node, func() error {
		for _, m := range mounts {
			if err := mountIn(m); err != nil {
				return err
			}
		}
		p.started = time.Now()
		return p.cmd.Start()
	})
	if err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	tb.Cleanup(p.stop)
	return p
}

// runIn runs fn inside the node, or with no node in a private mount
// namespace of its own on the host.
func runIn(node *virtualnode.Node, fn func() error) error {
	if node != nil {
		return node.Run(context.Background(), fn)
	}
	return osthread.Run(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
			return err
		}
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
			return err
		}
		return fn()
	})
}

func mountIn(m mount) error {
	if err := os.MkdirAll(m.dst, 0o755); err != nil {
		return err
	}
	if m.src == "" {
		return unix.Mount("tmpfs", m.dst, "tmpfs", 0, "size=64m")
	}
	return unix.Mount(m.src, m.dst, "", unix.MS_BIND, "")
}

// stop ends the daemon with SIGTERM, then SIGKILL after 10 s.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	os.Remove(p.log)
}

// alive is a context that ends when the process does.
func (p *proc) alive(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-p.exited:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// cpu is the CPU time the process's threads have run, from the
// scheduler's nanosecond accounting (utime/stime tick at 10 ms).
func (p *proc) cpu() time.Duration { return cpuOf(p.cmd.Process.Pid) }

func cpuOf(pid int) time.Duration {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var ns int64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			v, _ := strconv.ParseInt(f[0], 10, 64)
			ns += v
		}
	}
	return time.Duration(ns)
}

// rssMB is the process's resident set now (VmRSS) and at its peak
// (VmHWM), in MiB.
func (p *proc) rssMB() (now, peak float64) { return rssOf(p.cmd.Process.Pid) }

func rssOf(pid int) (now, peak float64) {
	mib := statusMiB(pid)
	return mib["VmRSS"], mib["VmHWM"]
}

// rssSplitOf is the process's resident set by kind, in MiB: anonymous
// (RssAnon: heap, stacks) and file-backed (RssFile: the executable's and
// libraries' pages).
func rssSplitOf(pid int) (anon, file float64) {
	mib := statusMiB(pid)
	return mib["RssAnon"], mib["RssFile"]
}

// statusMiB is every kB figure of /proc/PID/status, in MiB, by name.
func statusMiB(pid int) map[string]float64 {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	mib := map[string]float64{}
	for line := range bytes.Lines(b) {
		f := strings.Fields(string(line))
		if len(f) == 3 && f[2] == "kB" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			mib[strings.TrimSuffix(f[0], ":")] = kb / 1024
		}
	}
	return mib
}

// idleCPU is the CPU the process uses per second of wall time over d
// while nothing is asked of it, in ms/s.
func idleCPU(pid int, d time.Duration) float64 {
	c0, t0 := cpuOf(pid), time.Now()
	time.Sleep(d)
	return float64(cpuOf(pid)-c0) / float64(time.Millisecond) / time.Since(t0).Seconds()
}

// restCPU measures a daemon after its last request, in ms/s: first
// while it settles, over settle (the collector cleaning up after the
// work, memory going back to the kernel, the polls a request sets off),
// then at rest over window. An idle figure taken at once would measure
// the work's tail as much as the daemon at rest.
func restCPU(pid int, settle, window time.Duration) (settling, idle float64) {
	if settle > 0 {
		settling = idleCPU(pid, settle)
	}
	return settling, idleCPU(pid, window)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// tail is the end of a daemon's log, for failure messages.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// loadavg is the 1-minute load average, as /proc/loadavg gives it.
func loadavg() float64 {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// residentSections is how much of the code, read-only data and function
// tables (.gopclntab: names, lines, frame sizes and stack maps, which the
// runtime reads for every stack it scans or unwinds) of a process's
// static executable is resident in it, in MiB, from /proc/PID/pagemap.
func residentSections(pid int) (map[string]float64, error) {
	exe, err := elf.Open(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	defer exe.Close()
	if exe.Type != elf.ET_EXEC {
		return nil, fmt.Errorf("not a static executable at fixed addresses (%v)", exe.Type)
	}
	pagemap, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pagemap.Close()
	page := uint64(os.Getpagesize())
	mib := map[string]float64{}
	for _, name := range []string{".text", ".rodata", ".gopclntab"} {
		s := exe.Section(name)
		if s == nil || s.Size == 0 {
			continue
		}
		first, last := s.Addr/page, (s.Addr+s.Size-1)/page
		entries := make([]byte, 8*(last-first+1))
		if _, err := pagemap.ReadAt(entries, int64(first*8)); err != nil {
			return nil, fmt.Errorf("pagemap of %s: %w", name, err)
		}
		present := 0
		for i := 0; i < len(entries); i += 8 {
			if binary.LittleEndian.Uint64(entries[i:])&(1<<63) != 0 {
				present++
			}
		}
		mib[name] = float64(uint64(present)*page) / (1 << 20)
	}
	return mib, nil
}

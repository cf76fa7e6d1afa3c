package main

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// runAsWorkload makes the test binary the workload program when started
// with it set, so that the tests run the real main in a real process.
const runAsWorkload = "HWNET_TEST_RUN_WORKLOAD"

func TestMain(m *testing.M) {
	if os.Getenv(runAsWorkload) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// workload is a started workload process.
type workload struct {
	cmd    *exec.Cmd
	stdout chan string // its output lines, closed at EOF
	stderr bytes.Buffer
	exited chan error
}

func startWorkload(t *testing.T, attr *syscall.SysProcAttr, args ...string) *workload {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), runAsWorkload+"=1", "PCIDEVICE_INTEL_COM_E810=0000:3b:01.0")
	cmd.SysProcAttr = attr
	w := &workload{cmd: cmd, stdout: make(chan string, 1024), exited: make(chan error, 1)}
	cmd.Stderr = &w.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		// Wait closes stdout: read it all first.
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			w.stdout <- lines.Text()
		}
		close(w.stdout)
		w.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		w.wait(t, 10*time.Second)
	})
	return w
}

// env reads the environment `workload env` prints: the lines before
// envEnd. Once it printed them, it handles signals.
func (w *workload) env(t *testing.T) []string {
	t.Helper()
	var env []string
	timeout := time.After(10 * time.Second)
	for {
		select {
		case line, ok := <-w.stdout:
			switch {
			case !ok:
				t.Fatalf("workload %v ended its output after %d lines, before %q", w.cmd.Args[1:], len(env), envEnd)
			case line == envEnd:
				return env
			}
			env = append(env, line)
		case <-timeout:
			t.Fatalf("workload %v printed %d lines and no %q within 10s", w.cmd.Args[1:], len(env), envEnd)
		}
	}
}

func (w *workload) wait(t *testing.T, within time.Duration) error {
	t.Helper()
	select {
	case err := <-w.exited:
		w.exited <- err
		return err
	case <-time.After(within):
		t.Fatalf("workload %v did not exit within %s", w.cmd.Args[1:], within)
		return nil
	}
}

func TestSignalsEndTheWorkload(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			w := startWorkload(t, nil, "env")
			env := w.env(t)
			if want := slices.Sorted(slices.Values(w.cmd.Environ())); !slices.Equal(env, want) {
				t.Errorf("workload env printed\n%q\nwant its environment sorted\n%q", env, want)
			}
			if err := w.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := w.wait(t, 10*time.Second); err != nil {
				t.Errorf("workload after %v: %v, want exit status 0; stderr: %s", sig, err, &w.stderr)
			}
		})
	}
}

func TestWorkloadWaits(t *testing.T) {
	w := startWorkload(t, nil)
	select {
	case err := <-w.exited:
		w.exited <- err
		t.Fatalf("workload without arguments exited (%v), want it to wait for a signal", err)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestBadArguments(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"env", "extra"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			w := startWorkload(t, nil, args...)
			err := w.wait(t, 10*time.Second)
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Errorf("workload %q: %v, want exit status 2", args, err)
			}
			if !strings.Contains(w.stderr.String(), strconv.Quote(args[len(args)-1])) {
				t.Errorf("workload %q stderr %q, want it to name the argument", args, w.stderr.String())
			}
		})
	}
}

// TestPodSandbox runs the workload as PID 1 of a new PID namespace, as a
// pod's sandbox: the kernel delivers PID 1 only the signals it handles,
// and orphans of the namespace become its children.
func TestPodSandbox(t *testing.T) {
	vnodetest.RequireRoot(t)
	nsenter, err := exec.LookPath("nsenter")
	if err != nil {
		t.Fatalf("nsenter (util-linux), which makes an orphan in the namespace: %v", err)
	}
	w := startWorkload(t, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}, "env")
	w.env(t)
	pid := w.cmd.Process.Pid
	// The orphan must not hold the output pipe, or CombinedOutput would
	// wait for it to end.
	orphan := exec.Command(nsenter, "--target", strconv.Itoa(pid), "--pid", "--", "sh", "-c", "sleep 1 >/dev/null 2>&1 & exit 0")
	if out, err := orphan.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", orphan.Args, err, out)
	}
	waitChildren(t, pid, func(n int) bool { return n > 0 }, "the orphaned sleep to become its child")
	waitChildren(t, pid, func(n int) bool { return n == 0 }, "its orphaned child to be reaped (none left, not even a zombie)")
	if err := w.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := w.wait(t, 10*time.Second); err != nil {
		t.Errorf("workload as PID 1 after SIGTERM: %v, want exit status 0", err)
	}
}

func waitChildren(t *testing.T, pid int, done func(int) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := countChildren(t, pid)
		if done(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("workload (pid %d) still has %d children after 10s, waited for %s", pid, n, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// countChildren counts the processes, zombies included, whose parent is pid.
func countChildren(t *testing.T, pid int) int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, stat := range stats {
		data, err := os.ReadFile(stat)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			n++
		}
	}
	return n
}

// TestServeAndDial runs `workload serve` and `workload dial` as two
// processes on loopback: dial prints the hostname serve answers with and
// exits 0; dialling a port nothing serves exits 1.
func TestServeAndDial(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close() // free for serve; nothing else here takes it
	startWorkload(t, nil, "serve", port)
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	var answer []string
	// serve listens a moment after it starts: dial until it answers.
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := startWorkload(t, nil, "dial", "127.0.0.1:"+port)
		for line := range d.stdout {
			answer = append(answer, line)
		}
		if d.wait(t, 40*time.Second) == nil || time.Now().After(deadline) {
			break
		}
	}
	if !slices.Equal(answer, []string{host}) {
		t.Errorf("workload dial printed %q, want the server's hostname %q", answer, host)
	}
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := closed.Addr().String()
	closed.Close()
	d := startWorkload(t, nil, "dial", addr)
	var exit *exec.ExitError
	if err := d.wait(t, 40*time.Second); !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("workload dial %s with nothing serving: %v, want exit status 1", addr, err)
	}
}

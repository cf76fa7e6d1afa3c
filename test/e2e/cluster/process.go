package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a process gets between SIGTERM and SIGKILL.
const stopGrace = 10 * time.Second

// pollInterval paces every wait of the package.
const pollInterval = 100 * time.Millisecond

// startDetached starts argv with its output appended to logPath, in a
// session of its own and without a parent-death signal, so that it
// outlives the calling process. A goroutine reaps it should it exit while
// the caller lives.
func startDetached(name string, argv []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	// Reaped here; how it ended shows in its log and in running.
	go func() { _ = cmd.Wait() }()
	start, err := startTime(cmd.Process.Pid)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return &process{Name: name, Argv: argv, Log: logPath, PID: cmd.Process.Pid, StartTime: start}, nil
}

// startTime reads the start time of a process in clock ticks after boot
// (field 22 of /proc/PID/stat), which tells it apart from a later process
// with the same PID.
func startTime(pid int) (uint64, error) {
	fields, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

// statFields returns the fields of /proc/PID/stat after the command name,
// which may itself hold spaces: fields[0] is the state (field 3).
func statFields(pid int) ([]string, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(data)
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(s[end+1:])
	if len(fields) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 20", pid, len(fields))
	}
	return fields, nil
}

// running reports whether p still runs: its PID is alive, not a zombie,
// and started when p did.
func (p *process) running() bool {
	if p == nil || p.PID <= 0 {
		return false
	}
	fields, err := statFields(p.PID)
	if err != nil || fields[0] == "Z" {
		return false
	}
	return fields[19] == strconv.FormatUint(p.StartTime, 10)
}

// signal sends sig to p unless p is gone.
func (p *process) signal(sig syscall.Signal) error {
	if !p.running() {
		return nil
	}
	if err := syscall.Kill(p.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signal %s (pid %d): %w", p.Name, p.PID, err)
	}
	return nil
}

// stopProcesses sends SIGTERM to every process, then SIGKILL to those
// still running after grace, and waits until they are gone.
func stopProcesses(ctx context.Context, procs []*process, grace time.Duration) error {
	var errs []error
	for _, p := range procs {
		errs = append(errs, p.signal(syscall.SIGTERM))
	}
	if waitGone(ctx, procs, grace) == nil {
		return errors.Join(errs...)
	}
	for _, p := range procs {
		errs = append(errs, p.signal(syscall.SIGKILL))
	}
	errs = append(errs, waitGone(ctx, procs, grace))
	return errors.Join(errs...)
}

// waitGone waits until none of procs runs.
func waitGone(ctx context.Context, procs []*process, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		var left []string
		for _, p := range procs {
			if p.running() {
				left = append(left, fmt.Sprintf("%s (pid %d)", p.Name, p.PID))
			}
		}
		if len(left) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still running after %v: %s", timeout, strings.Join(left, ", "))
		case <-time.After(pollInterval):
		}
	}
}

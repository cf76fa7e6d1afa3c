package kubeapi

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// stopGrace is how long a process gets to exit after SIGTERM before SIGKILL.
const stopGrace = 10 * time.Second

// process is one child of the test binary with its output in logPath.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once cmd.Wait returned
	err     error         // cmd.Wait's result, valid after exited is closed
}

// startProcess runs binary with args, output appended to logPath. The
// child gets SIGKILL when the test binary dies, so a crashed or killed test
// leaves no server behind.
func startProcess(name, binary, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	defer logFile.Close()
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	p := &process{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child ends, not
		// the test binary. A goroutine that locks its thread and returns
		// without unlocking ends that thread, as entering a virtual node's
		// namespaces does; held here until the child exits, this thread
		// can be no such goroutine's.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// stop sends SIGTERM to the process's group, then SIGKILL after stopGrace,
// and waits until it is gone.
func (p *process) stop() error {
	pid := p.cmd.Process.Pid
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := syscall.Kill(-pid, syscall.SIGTERM); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("stop %s (pid %d): %w", p.name, pid, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopGrace):
	}
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, pid, err)
	}
	<-p.exited
	return nil
}

// exitError says how the process ended, or nil while it runs.
func (p *process) exitError() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited early (%v); log: %s", p.name, p.err, p.logPath)
	default:
		return nil
	}
}

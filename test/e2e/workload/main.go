// Command workload is the program of hwnet's end-to-end images: the pod
// sandbox (as /pause) and the test pods' container (as /workload).
//
// It waits for SIGTERM or SIGINT and exits 0. As PID 1 of a container the
// kernel delivers it no signal it does not handle, and as the sandbox of a
// pod sharing its PID namespace it inherits orphans, so it handles both
// signals itself and reaps every child that exits.
//
// Usage:
//
//	workload       wait
//	workload env   print the environment as sorted KEY=VALUE lines, then wait
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Environ(), os.Stdout, os.Stderr))
}

func run(args, environ []string, stdout, stderr io.Writer) int {
	// Subscribe before anything else: a signal that comes while the
	// environment is printed must not be lost.
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	switch {
	case len(args) == 0:
	case len(args) == 1 && args[0] == "env":
		if err := printEnv(stdout, environ); err != nil {
			fmt.Fprintf(stderr, "workload: %v\n", err)
			return 1
		}
	default:
		fmt.Fprintf(stderr, "workload: unknown arguments %q\nusage: workload [env]\n", args)
		return 2
	}
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			return 0
		}
		reapChildren()
	}
	return 0
}

func printEnv(w io.Writer, environ []string) error {
	sorted := slices.Sorted(slices.Values(environ))
	for _, kv := range sorted {
		if _, err := fmt.Fprintln(w, kv); err != nil {
			return fmt.Errorf("print environment: %w", err)
		}
	}
	return nil
}

// reapChildren collects every child that has exited: one SIGCHLD may
// stand for several.
func reapChildren() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}

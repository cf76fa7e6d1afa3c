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
//	workload             wait
//	workload env         print the environment as sorted KEY=VALUE lines and
//	                     the line envEnd after them, then wait
//	workload serve PORT  answer each TCP connection on PORT with the pod's
//	                     hostname and a newline, while it waits
//	workload dial ADDR   connect to ADDR (host:port), print the answer and
//	                     exit 0; exit 1 when it cannot, within dialTimeout
//
// serve and dial show that pods reach each other on the default network,
// across nodes too, with nothing but what the image already holds.
package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"
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
	case len(args) == 2 && args[0] == "serve":
		ln, err := net.Listen("tcp", net.JoinHostPort("", args[1]))
		if err != nil {
			fmt.Fprintf(stderr, "workload: serve: %v\n", err)
			return 1
		}
		defer ln.Close()
		go serve(ln, stderr)
	case len(args) == 2 && args[0] == "dial":
		if err := dial(args[1], stdout); err != nil {
			fmt.Fprintf(stderr, "workload: dial: %v\n", err)
			return 1
		}
		return 0
	default:
		fmt.Fprintf(stderr, "workload: unknown arguments %q\nusage: workload [env | serve PORT | dial HOST:PORT]\n", args)
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

// dialTimeout bounds dial: a pod network that cannot carry a connection
// fails it rather than hanging the pod.
const dialTimeout = 30 * time.Second

// serve answers every connection with the hostname until ln is closed.
func serve(ln net.Listener, stderr io.Writer) {
	name, err := os.Hostname()
	if err != nil {
		fmt.Fprintf(stderr, "workload: serve: %v\n", err)
	}
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		fmt.Fprintln(conn, name)
		conn.Close()
	}
}

// dial connects to addr, copies the answer to w and checks it ends the
// line serve writes.
func dial(addr string, w io.Writer) error {
	conn, err := net.DialTimeout("tcp", addr, dialTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(dialTimeout)); err != nil {
		return err
	}
	answer, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("read the answer of %s: %w", addr, err)
	}
	_, err = fmt.Fprint(w, answer)
	return err
}

// envEnd ends the environment `workload env` prints: its lines reach the
// pod's log one by one, and whoever reads the log knows it has them all
// only once this line is there.
const envEnd = "-- end of environment --"

func printEnv(w io.Writer, environ []string) error {
	sorted := slices.Sorted(slices.Values(environ))
	for _, line := range append(sorted, envEnd) {
		if _, err := fmt.Fprintln(w, line); err != nil {
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

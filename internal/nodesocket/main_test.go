package nodesocket_test

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"testing"

	"github.com/hwnet-io/hwnet/test/asuser"
)

// TestMain turns the test binary, re-run by asuser as another user, into
// a client of the socket named by its first argument.
func TestMain(m *testing.M) {
	if mode := asuser.Mode(); mode != "" {
		os.Exit(client(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// client pings the socket args[0], once in mode "ping", twice in mode
// "twice", and exits with the outcome of the last ping.
func client(mode string, args []string) int {
	times := map[string]int{"ping": 1, "twice": 2}[mode]
	var err error
	for range times {
		err = ping(args[0])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	return asuser.Outcome(err)
}

// ping sends "ping" and expects "pong" back.
func ping(socket string) error {
	c, err := net.Dial("unix", socket)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "pong\n" {
		return fmt.Errorf("answer %q, want pong", line)
	}
	return nil
}

// Package asuser runs a test's own binary again as another user, so a
// test can see what a real process without root gets from a socket. The
// test package's TestMain hands the re-run binary to its client code:
//
//	func TestMain(m *testing.M) {
//		if mode := asuser.Mode(); mode != "" {
//			os.Exit(client(mode, os.Args[1:]))
//		}
//		os.Exit(m.Run())
//	}
//
// CheckPeers runs such clients as each of Peers against a node socket, so
// that every node socket is held to the same table of who gets in.
package asuser

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// modeEnv carries the client mode to the re-run binary.
const modeEnv = "HWNET_ASUSER_MODE"

// Exit codes of a client: the socket answered, or refused it (connection
// refused, closed or reset; the directory not searchable). Any other code
// is a broken client.
const (
	Answered = 0
	Refused  = 3
)

// Outcome is a client's exit code for err, what its request got: nil is
// Answered; a connection refused, reset or closed unanswered, or a
// directory it may not enter, is Refused; anything else is 1.
func Outcome(err error) int {
	switch {
	case err == nil:
		return Answered
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, syscall.EACCES), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return Refused
	}
	return 1
}

// Mode is the client mode the binary was re-run in; "" in the test itself.
func Mode() string { return os.Getenv(modeEnv) }

// User is who a client runs as.
type User struct {
	UID, GID uint32
	Groups   []uint32 // supplementary; none when empty
}

// NobodyID is the uid and gid of the unprivileged user of most
// distributions.
const NobodyID = 65534

// Run runs the test binary as u in mode with args and returns its exit
// code and output. It needs root (vnodetest.RequireRoot).
func Run(t testing.TB, u User, mode string, args ...string) (int, string) {
	t.Helper()
	vnodetest.RequireRoot(t)
	cmd := exec.CommandContext(t.Context(), reachableBinary(t), args...)
	cmd.Env = append(os.Environ(), modeEnv+"="+mode)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String()
	case err != nil:
		t.Fatalf("running the test binary as %+v: %v", u, err)
	}
	return 0, out.String()
}

// reachableBinary links (or copies) the test binary into a directory any
// user may enter: go test builds it in a private one.
func reachableBinary(t testing.TB) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "asuser")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, filepath.Base(self))
	if os.Link(self, bin) == nil {
		return bin
	}
	if err := copyExecutable(self, bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

func copyExecutable(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("copy test binary: %w", err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		return fmt.Errorf("copy test binary: %w", err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy test binary: %w", err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("copy test binary: %w", err)
	}
	return nil
}

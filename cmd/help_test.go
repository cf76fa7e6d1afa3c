// Package cmd_test checks the command lines of hwnet's binaries together.
package cmd_test

import (
	"bufio"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// build compiles the command into dir.
func build(t *testing.T, dir, pkg string) string {
	t.Helper()
	out := filepath.Join(dir, filepath.Base(pkg))
	if b, err := exec.Command("go", "build", "-o", out, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// run runs the binary with an empty environment, as an operator's first
// try would be without CNI variables, and returns its output and exit code.
func run(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{}
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return string(out), code
}

// listed is the names indented under a "commands:" or "subcommands:"
// heading of a help text.
func listed(help string) []string {
	var names []string
	in := false
	for sc := bufio.NewScanner(strings.NewReader(help)); sc.Scan(); {
		line := sc.Text()
		switch {
		case strings.HasSuffix(line, "commands:"):
			in = true
		case in && strings.HasPrefix(line, "  "):
			names = append(names, strings.Fields(line)[0])
		case in:
			in = false
		}
	}
	return names
}

// walk runs -h on the command and every subcommand its help lists.
func walk(t *testing.T, bin string, args []string) {
	t.Helper()
	out, code := run(t, bin, append(args, "-h")...)
	if code != 0 {
		t.Errorf("%s %s -h: exit %d, want 0\n%s", filepath.Base(bin), strings.Join(args, " "), code, out)
	}
	for _, sub := range listed(out) {
		walk(t, bin, append(append([]string(nil), args...), sub))
	}
}

// TestEveryCommandAnswersHelpAndVersion: every binary and every
// subcommand answers -h with exit 0, and every binary --version with its
// release.
func TestEveryCommandAnswersHelpAndVersion(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds every binary")
	}
	dir := t.TempDir()
	for _, pkg := range []string{"github.com/hwnet-io/hwnet/cmd/hwnet-agent", "github.com/hwnet-io/hwnet/cmd/hwnetctl", "github.com/hwnet-io/hwnet/cmd/hwnet", "github.com/hwnet-io/hwnet/cmd/hwnet-controller", "github.com/hwnet-io/hwnet/cmd/hwnet-vnode-kernel"} {
		bin := build(t, dir, pkg)
		walk(t, bin, nil)
		out, code := run(t, bin, "--version")
		if code != 0 || !strings.Contains(out, filepath.Base(pkg)) || !strings.Contains(out, " go1.") {
			t.Errorf("%s --version: exit %d, %q; want exit 0 and the name, release and Go version", filepath.Base(pkg), code, out)
		}
		// The daemons and hwnetctl answer on stdout, for `$(... --version)`;
		// the CNI plugin answers a run without CNI_COMMAND on stderr, as
		// CNI's skel does.
		if filepath.Base(pkg) != "hwnet" {
			stdout, _ := exec.Command(bin, "--version").Output()
			if !strings.Contains(string(stdout), filepath.Base(pkg)) {
				t.Errorf("%s --version printed %q on stdout, want the version there", filepath.Base(pkg), stdout)
			}
		}
	}
	ctl := filepath.Join(dir, "hwnetctl")
	if got := listed(func() string { out, _ := run(t, ctl, "-h"); return out }()); len(got) < 3 {
		t.Errorf("hwnetctl -h lists %v: the walk would miss subcommands", got)
	}
}

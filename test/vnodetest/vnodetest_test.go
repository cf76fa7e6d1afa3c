package vnodetest

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestUnavailableSkipsOrFails runs Unavailable in a child test process:
// without HWNET_REQUIRE_ROOT it skips, with it (as in CI) it fails, and
// both times it says why.
func TestUnavailableSkipsOrFails(t *testing.T) {
	for _, tt := range []struct {
		name, env, wantLine string
	}{
		{"optional", "HWNET_REQUIRE_ROOT=", "--- SKIP: TestUnavailableHelper"},
		{"required", "HWNET_REQUIRE_ROOT=1", "--- FAIL: TestUnavailableHelper"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestUnavailableHelper$", "-test.v")
			cmd.Env = append(os.Environ(), "HWNET_VNODETEST_HELPER=1", tt.env)
			out, _ := cmd.CombinedOutput()
			for _, want := range []string{tt.wantLine, "no frobnicator here"} {
				if !strings.Contains(string(out), want) {
					t.Errorf("child test output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestUnavailableHelper(t *testing.T) {
	if os.Getenv("HWNET_VNODETEST_HELPER") != "1" {
		// skip-ok: a helper process, run with the variable set by TestUnavailableSkipsOrFails
		t.Skip("run by TestUnavailableSkipsOrFails")
	}
	Unavailable(t, "no frobnicator here")
}

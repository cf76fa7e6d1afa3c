package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The containerd releases test/e2e/build-containerd.sh builds from the Go
// module proxy (`make containerd-cdi`, CONTAINERD_VERSION picks another).
// 2.x is the default: it reads CDI specs and calls CNI STATUS for the
// node's network readiness. 1.7 reads CDI specs and calls no STATUS.
// Debian 12's 1.6, from PATH, reads no CDI specs: the cluster falls back to
// it only when the default release is not built.
const (
	DefaultContainerdVersion = "v2.4.2"
	LegacyContainerdVersion  = "v1.7.35"
	// ContainerdVersionEnv picks a built release, as Config.ContainerdVersion.
	ContainerdVersionEnv = "HWNET_E2E_CONTAINERD"
	// ContainerdBinaryEnv names a containerd binary, as Config.Containerd.
	ContainerdBinaryEnv = "HWNET_CONTAINERD"
	containerdCache     = "/var/cache/hwnet-ci/containerd"
	// shimBinary is the runc shim; a 2.x build has its own beside containerd.
	shimBinary = "containerd-shim-runc-v2"
)

// ContainerdBinary is where test/e2e/build-containerd.sh puts containerd
// version.
func ContainerdBinary(version string) string {
	return filepath.Join(containerdCache, version, "bin", containerd)
}

// defaultContainerd is the containerd binary Up runs when Config names
// none: $HWNET_CONTAINERD, else the built release version
// (Config.ContainerdVersion, $HWNET_E2E_CONTAINERD, else
// DefaultContainerdVersion), else "" (Debian's, from PATH) when the
// default release is not built. A release asked for but not built is an
// error.
func defaultContainerd(version string) (string, error) {
	if bin := os.Getenv(ContainerdBinaryEnv); bin != "" {
		return bin, nil
	}
	asked := cmp.Or(version, os.Getenv(ContainerdVersionEnv))
	bin := ContainerdBinary(cmp.Or(asked, DefaultContainerdVersion))
	_, err := os.Stat(bin)
	switch {
	case err == nil:
		return bin, nil
	case asked != "" || !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("containerd %s: %w (build it with `make containerd-cdi CONTAINERD_VERSION=%s`)", asked, err, asked)
	default:
		return "", nil
	}
}

// containerdVersion asks bin ("" for Debian's from PATH) its version, as
// "v2.4.2": `containerd --version` prints "containerd MODULE VERSION
// REVISION".
func containerdVersion(ctx context.Context, bin string) (string, error) {
	out, err := exec.CommandContext(ctx, cmp.Or(bin, containerd), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("containerd --version: %w", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) < 3 {
		return "", fmt.Errorf("containerd --version: unexpected output %q", out)
	}
	return "v" + strings.TrimPrefix(fields[2], "v"), nil
}

// isContainerd2 tells whether version is a containerd 2 or later: its
// configuration is version 3 and it calls CNI STATUS.
func isContainerd2(version string) bool {
	major, _, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	return major != "" && major != "0" && major != "1"
}

// runcShim is the runc shim built beside containerd bin, "" when there is
// none (containerd then runs the one in PATH).
func runcShim(bin string) string {
	if bin == "" {
		return ""
	}
	shim := filepath.Join(filepath.Dir(bin), shimBinary)
	if _, err := os.Stat(shim); err != nil {
		return ""
	}
	return shim
}

// ContainerdVersion is the version of the cluster's containerd, as
// "v2.4.2"; "" for a cluster brought up before it was recorded.
func (c *Cluster) ContainerdVersion() string { return c.st.ContainerdVersion }

// CNIStatusByRuntime tells whether the cluster's runtime calls CNI STATUS
// for its network readiness (containerd 2.x).
func (c *Cluster) CNIStatusByRuntime() bool { return isContainerd2(c.st.ContainerdVersion) }

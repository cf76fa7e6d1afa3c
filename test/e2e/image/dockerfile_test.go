package image

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// requireBuildah is Buildah as root, or skips the test, unless CI's
// HWNET_REQUIRE_ROOT=1 forbids skipping.
func requireBuildah(t *testing.T) Buildah {
	t.Helper()
	vnodetest.RequireRoot(t) // buildah's storage is under /var/cache and /run
	b, err := FindBuildah()
	if err != nil {
		vnodetest.Unavailable(t, err.Error())
	}
	return b
}

// ociConfig is the part of the OCI image config the test checks.
type ociConfig struct {
	User       string
	Entrypoint []string
	Cmd        []string
	Labels     map[string]string
}

// TestDockerfileBuildah: `buildah bud` of the Dockerfile (its base images
// replaced by the local stand-ins of test/buildah/bud-local.sh, as no
// registry is reachable) gives a working image holding what `make image`
// holds: the agent as root entrypoint, the CNI shim (hwnet, which the
// agent installs on the node with hwnet's CNI configuration), hwnetctl and
// hwnet-controller, static, each answering --version with git describe's
// version when run inside the image.
func TestDockerfileBuildah(t *testing.T) {
	b := requireBuildah(t)
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	ref := "localhost/hwnet-test:dockerfile-" + strconv.Itoa(os.Getpid())
	start := time.Now()
	version, err := b.BuildDockerfile(ctx, repo, ref)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Run(context.Background(), "rmi", ref) })
	t.Logf("buildah bud: %.1fs", time.Since(start).Seconds())

	checkConfig(ctx, t, b, ref, version)
	container := mustBuildah(ctx, t, b, "from", "--pull=never", ref)
	t.Cleanup(func() { b.Run(context.Background(), "rm", container) })
	root := mustBuildah(ctx, t, b, "mount", container)

	release, err := Release(ctx, repo, t.TempDir(), "example.com/hwnet:v9")
	if err != nil {
		t.Fatalf("make image's Release: %v", err)
	}
	data, err := os.ReadFile(release)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range loadArchive(t, data).layer {
		checkSameFile(t, root, m)
	}
	for _, name := range []string{"hwnet-agent", "hwnet", "hwnetctl", "hwnet-controller"} {
		// Some print their version on standard error, as flag's -h does.
		out, err := b.Command(ctx, "run", "--network=none", container, "--", "/usr/bin/"+name, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), " "+version+" ") {
			t.Errorf("%s --version in the image: %v, %q; want git describe's %q", name, err, out, version)
		}
	}
	// What the base (distroless static) gives besides: the nonroot account
	// and CA certificates.
	if passwd, err := os.ReadFile(filepath.Join(root, "etc/passwd")); err != nil || !strings.Contains(string(passwd), "\nnonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd %q (%v), want distroless's nonroot account", passwd, err)
	}
	if _, err := os.Stat(filepath.Join(root, "etc/ssl/certs/ca-certificates.crt")); err != nil {
		t.Errorf("CA certificates: %v", err)
	}
}

func mustBuildah(ctx context.Context, t *testing.T, b Buildah, args ...string) string {
	t.Helper()
	out, err := b.Run(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// checkConfig checks the image's entrypoint, user and version label.
func checkConfig(ctx context.Context, t *testing.T, b Buildah, ref, version string) {
	t.Helper()
	out := mustBuildah(ctx, t, b, "inspect", "--type", "image", ref)
	var inspected struct {
		OCIv1 struct {
			Config ociConfig `json:"config"`
		}
	}
	if err := json.Unmarshal([]byte(out), &inspected); err != nil {
		t.Fatalf("buildah inspect %s: %v", ref, err)
	}
	config := inspected.OCIv1.Config
	if want := []string{"/usr/bin/hwnet-agent"}; !slices.Equal(config.Entrypoint, want) || len(config.Cmd) != 0 {
		t.Errorf("Entrypoint %q Cmd %q, want %q and no Cmd", config.Entrypoint, config.Cmd, want)
	}
	if config.User != "0:0" {
		t.Errorf("User %q, want 0:0: the agent needs root on the node", config.User)
	}
	if got := config.Labels["org.opencontainers.image.version"]; got != version {
		t.Errorf("label org.opencontainers.image.version %q, want %q", got, version)
	}
}

// checkSameFile checks that the file m of `make image`'s layer is in the
// image under root with the same mode, and static when executable.
func checkSameFile(t *testing.T, root string, m member) {
	t.Helper()
	if m.header.Typeflag != '0' {
		return
	}
	path := filepath.Join(root, m.header.Name)
	info, err := os.Lstat(path)
	if err != nil {
		t.Errorf("make image's /%s: not in the Dockerfile's image: %v", m.header.Name, err)
		return
	}
	if got := int64(info.Mode().Perm()); !info.Mode().IsRegular() || got != m.header.Mode {
		t.Errorf("/%s: mode %v, want a regular file of mode %o as make image's", m.header.Name, info.Mode(), m.header.Mode)
	}
	if m.header.Mode&0o111 != 0 {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		checkBinary(t, path, data)
	}
}

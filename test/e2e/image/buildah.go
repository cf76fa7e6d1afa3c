package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// Buildah builds the repository's Dockerfile with buildah bud, as a user
// with Buildah or Podman does, on a machine that reaches no registry: the
// Dockerfile's base images are the local stand-ins test/buildah/bud-local.sh
// commits, the go command's modules come from the host's module cache
// (GOPROXY=file://) and the build has no network.
type Buildah struct {
	// Path is the buildah binary.
	Path string
	// Dir holds Buildah's storage (the stand-ins stay there between runs)
	// and its temporary directory, where RUN --mount=type=cache keeps the
	// Dockerfile's module cache.
	Dir string
}

// DefaultBuildahDir is Buildah.Dir unless $HWNET_BUILDAH_DIR says otherwise.
const DefaultBuildahDir = "/var/cache/hwnet-ci/buildah"

// FindBuildah is buildah from PATH (Debian's buildah package;
// test/install-deps.sh installs it) on $HWNET_BUILDAH_DIR or
// DefaultBuildahDir.
func FindBuildah() (Buildah, error) {
	path, err := exec.LookPath("buildah")
	if err != nil {
		return Buildah{}, fmt.Errorf("buildah not found (test/install-deps.sh installs it): %w", err)
	}
	dir := os.Getenv("HWNET_BUILDAH_DIR")
	if dir == "" {
		dir = DefaultBuildahDir
	}
	return Buildah{Path: path, Dir: dir}, nil
}

// global is buildah's storage options for b.
func (b Buildah) global() []string {
	// The run root holds mount state: it belongs on /run, which a reboot
	// empties, and is named after Dir so that two Dirs never share one.
	sum := sha256.Sum256([]byte(b.Dir))
	runRoot := filepath.Join("/run", "hwnet-buildah-"+hex.EncodeToString(sum[:6]))
	return []string{"--root", filepath.Join(b.Dir, "storage"), "--runroot", runRoot}
}

// env is the environment of buildah and of bud-local.sh.
func (b Buildah) env() []string {
	return append(os.Environ(), "TMPDIR="+filepath.Join(b.Dir, "tmp"), "CONTAINERS_CONF="+b.containersConf(),
		"BUILDAH="+b.Path, "BUILDAH_OPTS="+strings.Join(b.global(), " "))
}

// Command is buildah with args on b's storage.
func (b Buildah) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, b.Path, append(b.global(), args...)...)
	cmd.Env = b.env()
	return cmd
}

// Run runs buildah with args and returns its standard output.
func (b Buildah) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := b.Command(ctx, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("buildah %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// containersConf is the path of the containers.conf that keeps Buildah's
// network configuration (which it locks even without a network) in Dir,
// away from the node's /etc/cni/net.d.
func (b Buildah) containersConf() string {
	return filepath.Join(b.Dir, "containers.conf")
}

// prepare creates Dir's temporary directory and containers.conf.
func (b Buildah) prepare() error {
	if err := os.MkdirAll(filepath.Join(b.Dir, "tmp"), 0o755); err != nil {
		return fmt.Errorf("buildah: %w", err)
	}
	conf := fmt.Sprintf("[network]\nnetwork_config_dir = %q\n", filepath.Join(b.Dir, "net.d"))
	if err := atomicfile.Write(b.containersConf(), []byte(conf), 0o644); err != nil {
		return fmt.Errorf("buildah: %w", err)
	}
	return nil
}

// BuildDockerfile builds repo's Dockerfile with test/buildah/bud-local.sh
// into b's storage, tagged ref, with the version `git describe` says, and
// returns that version. Builds in one Dir wait for each other.
func (b Buildah) BuildDockerfile(ctx context.Context, repo, ref string) (string, error) {
	if err := b.prepare(); err != nil {
		return "", err
	}
	// One build at a time in Dir: a build that replaces a stale stand-in
	// would remove it under another build's FROM.
	unlock, err := lockDir(b.Dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	goCache, err := exec.CommandContext(ctx, "go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("buildah: go env GOCACHE: %w", err)
	}
	version := describe(ctx, repo)
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(repo, "test/buildah/bud-local.sh"), "--quiet", "-t", ref,
		"--build-arg", "VERSION="+version,
		// The host's build cache in place of the Dockerfile's cache mount:
		// what the host compiled already (same toolchain, -trimpath) is
		// not compiled again.
		"-v", strings.TrimSpace(string(goCache))+":/root/.cache/go-build", repo)
	cmd.Env = b.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("buildah: test/buildah/bud-local.sh: %w: %s", err, out)
	}
	return version, nil
}

// SaveDockerArchive writes the image ref in b's storage to path as a
// docker-archive tarball, tagged ref, for `ctr images import`.
func (b Buildah) SaveDockerArchive(ctx context.Context, ref, path string) error {
	os.Remove(path) // buildah push refuses to overwrite an archive
	_, err := b.Run(ctx, "push", "--quiet", ref, "docker-archive:"+path+":"+ref)
	return err
}

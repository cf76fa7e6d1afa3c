package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/hwnet-io/hwnet/internal/atomicfile"
)

// The images' references, as pods and containerd's sandbox_image name them.
const (
	// Pause is the sandbox image: /pause waits for SIGTERM or SIGINT and
	// reaps the pod's orphans.
	Pause = "hwnet.local/pause:e2e"
	// Workload is the test pods' image: /workload (also as /pause) waits
	// like Pause; `/workload env` first prints its environment.
	Workload = "hwnet.local/workload:e2e"
	// Agent holds hwnet-agent, the hwnet CNI shim, hwnetctl and
	// hwnet-controller under /usr/bin, as deploy/ runs them.
	Agent = "hwnet:dev"
)

// BuildTags are the build tags of hwnet's shipped binaries, here as in the
// Dockerfile and `make build`. grpcnotrace leaves out grpc's
// golang.org/x/net/trace, whose text/template calls methods by name: with
// it linked, the linker keeps every exported method of every type (the
// agent's code and tables 59 MB instead of 38, and the Kubernetes API's
// documentation maps on its heap). grpc's tracing is off unless a program
// turns it on, and hwnet does not.
const BuildTags = "grpcnotrace"

// writerVersion is part of every tarball's stamp. Change it when Write's
// output changes for the same Spec, so that cached tarballs are rebuilt.
const writerVersion = 1

// packages are the main packages whose binaries the images hold; each
// binary is named after its package's directory.
func packages() []string { return append(agentPackages(), "./test/e2e/workload") }

// agentPackages are those of hwnet's own image.
func agentPackages() []string {
	return []string{"./cmd/hwnet-agent", "./cmd/hwnet", "./cmd/hwnetctl", "./cmd/hwnet-controller"}
}

// namedSpec is an image and the name of its tarball in the output directory.
type namedSpec struct {
	file string
	spec Spec
}

// specs describes the images, given the directory the binaries are in.
func specs(bin string) []namedSpec {
	exe := func(path, name string) File { return executable(bin, path, name) }
	return []namedSpec{
		{"pause.tar", Spec{Ref: Pause, Env: pathEnv(), Entrypoint: []string{"/pause"},
			Files: append(accounts(), exe("/pause", "workload"))}},
		{"workload.tar", Spec{Ref: Workload, Env: pathEnv(), Entrypoint: []string{"/workload"},
			Files: append(accounts(), exe("/workload", "workload"), exe("/pause", "workload"))}},
		{"agent.tar", agentSpec(bin, Agent)},
	}
}

// agentSpec is the agent's image as the Dockerfile builds it, tagged ref.
func agentSpec(bin, ref string) Spec {
	exe := func(path, name string) File { return executable(bin, path, name) }
	return Spec{Ref: ref, Env: pathEnv(), Entrypoint: []string{"/usr/bin/hwnet-agent"},
		Files: append(accounts(), exe("/usr/bin/hwnet-agent", "hwnet-agent"), exe("/usr/bin/hwnet", "hwnet"),
			exe("/usr/bin/hwnetctl", "hwnetctl"), exe("/usr/bin/hwnet-controller", "hwnet-controller"))}
}

func pathEnv() []string {
	return []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
}

// accounts are the /etc/passwd and /etc/group of root alone.
func accounts() []File {
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n")},
		{Path: "/etc/group", Mode: 0o644, Data: []byte("root:x:0:\n")},
	}
}

func executable(bin, path, name string) File {
	return File{Path: path, Mode: 0o755, Source: filepath.Join(bin, name)}
}

// Release builds hwnet's image alone, tagged ref, as dir/hwnet-image.tar:
// what `make image` gives a machine without a container daemon.
func Release(ctx context.Context, repo, dir, ref string) (string, error) {
	bin, unlock, err := prepare(ctx, repo, dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	tarball := filepath.Join(dir, "hwnet-image.tar")
	return tarball, writeCached(tarball, agentSpec(bin, ref))
}

// prepare locks dir and builds the binaries into dir/bin.
func prepare(ctx context.Context, repo, dir string) (bin string, unlock func(), err error) {
	bin = filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", nil, fmt.Errorf("images: %w", err)
	}
	if unlock, err = lockDir(dir); err != nil {
		return "", nil, err
	}
	if err := buildBinaries(ctx, repo, bin, runtime.GOARCH, packages()); err != nil {
		unlock()
		return "", nil, err
	}
	return bin, unlock, nil
}

// ReleaseIndex builds hwnet's image for each of arches (GOARCH names, the
// binaries cross-compiled), tagged ref, as one OCI image layout tarball,
// dir/hwnet-image-oci.tar: a manifest list from which each node's runtime
// takes its own CPU's image.
func ReleaseIndex(ctx context.Context, repo, dir, ref string, arches []string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("images: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	var platforms []Spec
	for _, arch := range arches {
		bin := filepath.Join(dir, "bin-"+arch)
		if err := os.MkdirAll(bin, 0o755); err != nil {
			return "", fmt.Errorf("images: %w", err)
		}
		if err := buildBinaries(ctx, repo, bin, arch, agentPackages()); err != nil {
			return "", err
		}
		s := agentSpec(bin, ref)
		s.Architecture = arch
		platforms = append(platforms, s)
	}
	tarball := filepath.Join(dir, "hwnet-image-oci.tar")
	return tarball, writeAtomically(tarball, func(w io.Writer) error { return WriteIndex(w, ref, platforms) })
}

// Images builds the end-to-end images into dir (created if missing) and
// returns the paths of their tarballs: Pause, Workload and Agent, in this
// order. repo is the root of the hwnet repository. The binaries are built
// into dir/bin by the go command, which leaves up-to-date ones untouched;
// a tarball is rewritten only when the stamp next to it (a digest of its
// Spec and the binaries' contents) no longer matches.
func Images(ctx context.Context, repo, dir string) ([]string, error) {
	bin, unlock, err := prepare(ctx, repo, dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var paths []string
	for _, s := range specs(bin) {
		tarball := filepath.Join(dir, s.file)
		if err := writeCached(tarball, s.spec); err != nil {
			return nil, err
		}
		paths = append(paths, tarball)
	}
	return paths, nil
}

// lockDir serializes Images calls (and Buildah builds) on dir, from test
// binaries run in parallel as from a harness.
func lockDir(dir string) (unlock func(), err error) {
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("images: lock: %w", err)
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		lock.Close()
		return nil, fmt.Errorf("images: lock %s: %w", lock.Name(), err)
	}
	return func() { lock.Close() }, nil
}

// buildBinaries builds the main packages pkgs into bin, statically, for
// the CPU goarch.
func buildBinaries(ctx context.Context, repo, bin, goarch string, pkgs []string) error {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("images: the go command builds the images' binaries: %w", err)
	}
	stamp := "-X github.com/hwnet-io/hwnet/internal/version.stamped=" + describe(ctx, repo)
	args := append([]string{"build", "-trimpath", "-tags", BuildTags, "-ldflags", stamp, "-o", bin + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, goTool, args...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("images: go %v in %s: %w\n%s", args, repo, err, out)
	}
	return nil
}

// writeCached writes the tarball of s to path unless the stamp next to it
// says it already holds exactly that.
func writeCached(path string, s Spec) error {
	stamp := path + ".stamp"
	digest, err := inputDigest(s)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(stamp)
	if err == nil && string(old) == digest {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	// A stamp left beside a tarball it no longer describes would let a
	// later call with these old inputs reuse the wrong tarball.
	if err := os.Remove(stamp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	if err := writeTarball(path, s); err != nil {
		return err
	}
	if err := atomicfile.Write(stamp, []byte(digest), 0o644); err != nil {
		return fmt.Errorf("image %s: stamp: %w", s.Ref, err)
	}
	return nil
}

// writeTarball writes the archive of s next to path and renames it over
// path, so that an importer never reads half a tarball.
func writeTarball(path string, s Spec) error {
	if err := writeAtomically(path, func(w io.Writer) error { return Write(w, s) }); err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	return nil
}

// writeAtomically has write fill a file next to path, renamed over path
// once whole, so that an importer never reads half a tarball.
func writeAtomically(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	err = write(tmp)
	if closeErr := tmp.Close(); err == nil {
		err = closeErr
	}
	if err == nil {
		err = os.Chmod(tmp.Name(), 0o644)
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// inputDigest is a sha256 of everything Write's output depends on: s
// with each file's content in place of its Source, and writerVersion.
func inputDigest(s Spec) (string, error) {
	type fileInput struct {
		Path   string
		Mode   uint32
		SHA256 string
	}
	files := make([]fileInput, len(s.Files))
	for i, f := range s.Files {
		sum, err := contentDigest(f)
		if err != nil {
			return "", fmt.Errorf("image %s: Files[%d].Source %q: %w", s.Ref, i, f.Source, err)
		}
		files[i] = fileInput{Path: f.Path, Mode: uint32(f.Mode), SHA256: sum}
	}
	s.Files = nil
	input, err := json.Marshal(struct {
		Version int
		Spec    Spec
		Files   []fileInput
	}{writerVersion, s, files})
	if err != nil {
		return "", fmt.Errorf("image %s: %w", s.Ref, err)
	}
	return sha256Hex(input), nil
}

func contentDigest(f File) (string, error) {
	if f.Source == "" {
		return sha256Hex(f.Data), nil
	}
	file, err := os.Open(f.Source)
	if err != nil {
		return "", err
	}
	defer file.Close()
	hash := sha256.New()
	if _, err := io.Copy(hash, file); err != nil {
		return "", err
	}
	return hex.EncodeToString(hash.Sum(nil)), nil
}

// describe is `git describe` of the repository, which --version shows;
// "unknown" outside a git checkout.
func describe(ctx context.Context, repo string) string {
	cmd := exec.CommandContext(ctx, "git", "describe", "--tags", "--always", "--dirty")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

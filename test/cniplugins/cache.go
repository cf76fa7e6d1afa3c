package cniplugins

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// cache is the directory the binaries are built into. Reference plugins and
// cnitool lie flat in it, as install-cni-plugins.sh lays them out; each
// recorder build lies in recorder/<hash of its sources>/.
type cache struct {
	root   string
	goTool string
	logf   func(format string, args ...any)
}

func openCache(logf func(format string, args ...any)) (*cache, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("the go command builds the CNI plugins: %w", err)
	}
	root, err := cacheRoot()
	if err != nil {
		return nil, fmt.Errorf("cache directory: %w", err)
	}
	return &cache{root: root, goTool: goTool, logf: logf}, nil
}

func cacheRoot() (string, error) {
	if dir := os.Getenv("HWNET_CNI_BIN_CACHE"); dir != "" {
		// Dir links to the binaries from elsewhere: the path must be absolute.
		abs, err := filepath.Abs(dir)
		if err != nil {
			return "", err
		}
		return abs, os.MkdirAll(abs, 0o755)
	}
	ci := filepath.Join("/var/cache/hwnet-ci/cni-bin", Version)
	if os.MkdirAll(ci, 0o755) == nil && unix.Access(ci, unix.W_OK) == nil {
		return ci, nil
	}
	user, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(user, "hwnet", "cni-bin", Version)
	return dir, os.MkdirAll(dir, 0o755)
}

// binaries returns the paths of every binary Dir provides, building the
// missing ones.
func (c *cache) binaries(ctx context.Context) ([]string, error) {
	recorder, err := c.recorder(ctx)
	if err != nil {
		return nil, err
	}
	cniVersion, err := dependencyVersion(recorder, cniModule)
	if err != nil {
		return nil, err
	}
	installs := []install{{module: pluginsModule, version: Version, packages: referencePlugins()},
		{module: cniModule, version: cniVersion, packages: []string{"cnitool"}}}
	paths := []string{recorder}
	for _, in := range installs {
		if err := c.fill(func() []string { return c.stale(in) }, func(stale []string) error {
			return c.install(ctx, in.module, in.version, stale)
		}); err != nil {
			return nil, err
		}
		for _, pkg := range in.packages {
			paths = append(paths, filepath.Join(c.root, path.Base(pkg)))
		}
	}
	return paths, nil
}

// install is a set of packages of one module version, installed together.
type install struct {
	module, version string
	packages        []string
}

// stale returns the packages of in whose binary the cache lacks or holds
// from another version.
func (c *cache) stale(in install) []string {
	var stale []string
	for _, pkg := range in.packages {
		bin := filepath.Join(c.root, path.Base(pkg))
		if !builtFrom(bin, in.module, in.version) {
			stale = append(stale, pkg)
		}
	}
	return stale
}

// fill builds, holding the cache lock, what missing still reports once the
// lock is held: another test binary may have built it meanwhile.
func (c *cache) fill(missing func() []string, build func([]string) error) error {
	if len(missing()) == 0 {
		return nil
	}
	lock, err := os.OpenFile(filepath.Join(c.root, ".lock"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("cache lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("cache lock %s: %w", lock.Name(), err)
	}
	if still := missing(); len(still) > 0 {
		return build(still)
	}
	return nil
}

// install runs go install for packages of module@version and moves the
// binaries into the cache, each by a rename so that no reader ever sees a
// half-written one.
func (c *cache) install(ctx context.Context, module, version string, packages []string) error {
	args := []string{"install"}
	for _, pkg := range packages {
		args = append(args, module+"/"+pkg+"@"+version)
	}
	return c.build(ctx, "", args, func(tmp string) error {
		var errs []error
		for _, pkg := range packages {
			name := path.Base(pkg)
			errs = append(errs, os.Rename(filepath.Join(tmp, name), filepath.Join(c.root, name)))
		}
		return errors.Join(errs...)
	})
}

// build runs the go command with args in dir (a scratch directory when
// empty) and GOBIN set to a scratch directory inside the cache, then
// publishes what it built from there.
func (c *cache) build(ctx context.Context, dir string, args []string, publish func(tmp string) error) error {
	tmp, err := os.MkdirTemp(c.root, ".build-")
	if err != nil {
		return fmt.Errorf("build directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	if dir == "" {
		dir = tmp
	}
	c.logf("cniplugins: go %v (into %s)", args, c.root)
	cmd := exec.CommandContext(ctx, c.goTool, args...)
	cmd.Dir = dir
	// Installs of module@version must not see hwnet's workspace or flags.
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=", "CGO_ENABLED=0")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, out)
	}
	c.logf("cniplugins: built in %s", time.Since(start).Round(time.Millisecond))
	return publish(tmp)
}

package cniplugins

import (
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// recorderRetention is how long an unused recorder build stays in the
// cache: every edit of the recorder leaves one behind.
const recorderRetention = 7 * 24 * time.Hour

// recorder returns the path of a recorder built from the working tree's
// sources, building it when the cache has no build of exactly these sources.
func (c *cache) recorder(ctx context.Context) (string, error) {
	src, err := recorderSource()
	if err != nil {
		return "", err
	}
	key, err := sourceKey(src)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(c.root, "recorder", key)
	bin := filepath.Join(dir, Recorder)
	// Marking the build as used before looking keeps a concurrent prune
	// from taking it.
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
	missing := func() []string {
		if _, err := os.Stat(bin); err != nil {
			return []string{Recorder}
		}
		return nil
	}
	err = c.fill(missing, func([]string) error {
		// go install names the binary after the package's directory.
		return c.build(ctx, src, []string{"install", "-buildvcs=false", "."}, func(tmp string) error {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if err := os.Rename(filepath.Join(tmp, filepath.Base(src)), bin); err != nil {
				return err
			}
			return pruneRecorders(filepath.Dir(dir), now)
		})
	})
	return bin, err
}

// recorderSource finds the recorder's sources next to this file's.
func recorderSource() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("cannot tell where the cniplugins sources are")
	}
	src := filepath.Join(filepath.Dir(file), "recorder")
	if _, err := os.Stat(filepath.Join(src, "main.go")); err != nil {
		return "", fmt.Errorf("recorder sources (was the test built with -trimpath?): %w", err)
	}
	return src, nil
}

// sourceKey hashes what a recorder build depends on: its own sources (it
// imports nothing else from hwnet), the module's go.mod and go.sum, which pin
// everything else, and the Go toolchain.
func sourceKey(src string) (string, error) {
	files, err := filepath.Glob(filepath.Join(src, "*.go"))
	if err != nil {
		return "", err
	}
	module := filepath.Dir(filepath.Dir(filepath.Dir(src)))
	files = append(files, filepath.Join(module, "go.mod"), filepath.Join(module, "go.sum"))
	h := sha256.New()
	fmt.Fprintf(h, "%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("recorder sources: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)[:12]), nil
}

// pruneRecorders removes the recorder builds in dir unused since
// recorderRetention before now.
func pruneRecorders(dir string, now time.Time) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		info, err := e.Info()
		if err == nil && now.Sub(info.ModTime()) > recorderRetention {
			errs = append(errs, os.RemoveAll(filepath.Join(dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// builtFrom reports whether bin is a Go binary built from module at version.
func builtFrom(bin, module, version string) bool {
	info, err := buildinfo.ReadFile(bin)
	return err == nil && info.Main.Path == module && info.Main.Version == version
}

// dependencyVersion returns the version of module that bin was built with.
func dependencyVersion(bin, module string) (string, error) {
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("build info of %s: %w", bin, err)
	}
	for _, dep := range info.Deps {
		if dep.Path != module {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		if dep.Version == "" {
			return "", fmt.Errorf("%s is replaced by a directory in go.mod: no version to install cnitool at", module)
		}
		return dep.Version, nil
	}
	return "", fmt.Errorf("%s was not built with %s", bin, module)
}

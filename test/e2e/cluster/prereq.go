package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// runtimeCommands are the programs Up runs from PATH: containerd and runc
// from Debian's containerd and runc packages, nsenter and unshare from
// util-linux, and iptables, with which a worker's namespace reaches the
// API server's service address (fabric.go).
func runtimeCommands() []string {
	return []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "nsenter", "unshare", "iptables"}
}

// runtimePackages are the Debian packages that give runtimeCommands.
func runtimePackages() []string { return []string{"containerd", "runc", "iptables"} }

// kubeBinaries are the Kubernetes programs Up needs in Config.KubeBinDir.
func kubeBinaries() []string {
	return []string{etcd, kubeAPIServer, controllerManager, scheduler, kubelet, "kubectl"}
}

// cniPlugins are the reference plugins the default pod network and
// containerd need: containerd sets up every pod's loopback with the
// loopback plugin.
func cniPlugins() []string { return []string{"bridge", "host-local", "loopback"} }

// ensureRuntime installs runtimePackages with apt-get when a runtime
// command is missing.
func ensureRuntime(ctx context.Context, log io.Writer) error {
	if missing := missingCommands(); len(missing) == 0 {
		return nil
	}
	// Another apt-get (a second cluster starting, unattended upgrades) is
	// waited for, not failed on.
	apt := []string{"apt-get", "-o", "DPkg::Lock::Timeout=600"}
	install := slices.Concat(apt, []string{"install", "-y", "--no-install-recommends"}, runtimePackages())
	if err := run(ctx, log, install...); err != nil {
		// The package lists may be missing or stale on a fresh machine.
		if err := run(ctx, log, slices.Concat(apt, []string{"update"})...); err != nil {
			return err
		}
		if err := run(ctx, log, install...); err != nil {
			return err
		}
	}
	if missing := missingCommands(); len(missing) > 0 {
		return fmt.Errorf("%s not found in PATH after installing %s", strings.Join(missing, ", "), strings.Join(runtimePackages(), ", "))
	}
	return nil
}

func missingCommands() []string {
	var missing []string
	for _, name := range runtimeCommands() {
		if _, err := exec.LookPath(name); err != nil {
			missing = append(missing, name)
		}
	}
	return missing
}

func checkKubeBinaries(dir string) error {
	var missing []string
	for _, name := range kubeBinaries() {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not found in %s; build them with `make kube-bins` or `bash test/kubeapi/build-kube.sh %s %s`",
			strings.Join(missing, ", "), dir, KubeVersion, dir)
	}
	return nil
}

// ensureCNIPlugins installs the reference plugins into dir with the
// repository's install script when one the cluster needs is missing.
func ensureCNIPlugins(ctx context.Context, cfg Config) error {
	if !missingFiles(cfg.CNIBinDir, cniPlugins()...) {
		return nil
	}
	script := filepath.Join(cfg.Repo, "test", "install-cni-plugins.sh")
	return run(ctx, cfg.Progress, "bash", script, cfg.CNIBinDir)
}

func missingFiles(dir string, names ...string) bool {
	for _, name := range names {
		if !fileExists(filepath.Join(dir, name)) {
			return true
		}
	}
	return false
}

// copyCNIPlugins copies every plugin of from into the cluster's
// /opt/cni/bin: a copy, not a link, as containers that mount /opt/cni/bin
// (hwnet-agent runs delegate plugins from there) do not see from, and
// replacing a file there must not touch the cache.
func copyCNIPlugins(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("CNI plugins: %w", err)
	}
	for _, e := range entries {
		if e.Type().IsRegular() && !strings.HasPrefix(e.Name(), ".") {
			if err := copyFile(filepath.Join(from, e.Name()), filepath.Join(to, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	return errors.Join(err, dst.Close())
}

// run runs a command with its output going to log.
func run(ctx context.Context, log io.Writer, argv ...string) error {
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
	}
	return nil
}

// findRepo returns the hwnet repository above the working directory.
func findRepo() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for ; ; dir = filepath.Dir(dir) {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(data), "module github.com/hwnet-io/hwnet\n") {
			return dir, nil
		}
		if dir == "/" {
			return "", errors.New("hwnet repository (go.mod) not found above the working directory; set Config.Repo")
		}
	}
}

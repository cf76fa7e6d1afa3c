package kubeapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// StartScheduler runs the real kube-scheduler of the same release against
// the server, as the admin, until the test ends: for tests of what the
// scheduler writes to pods (or leaves alone). It serves no port of its
// own and holds no lease.
func (s *Server) StartScheduler(t testing.TB) {
	t.Helper()
	binary := filepath.Join(s.binDir, "kube-scheduler")
	if _, err := os.Stat(binary); err != nil {
		t.Fatalf("kubeapi: %v; `make kube-bins` builds kube-scheduler with kube-apiserver", err)
	}
	dir := t.TempDir()
	kubeconfig := s.WriteKubeconfig(t, dir)
	p, err := startProcess("kube-scheduler", binary, filepath.Join(dir, "kube-scheduler.log"), []string{
		"--kubeconfig=" + kubeconfig, "--authentication-kubeconfig=" + kubeconfig, "--authorization-kubeconfig=" + kubeconfig,
		"--leader-elect=false", "--secure-port=0",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			if lines, err := lastLines(p.logPath, 20); err == nil {
				t.Logf("kube-scheduler log tail:\n%s", strings.Join(lines, "\n"))
			}
		}
		_ = p.stop()
	})
}

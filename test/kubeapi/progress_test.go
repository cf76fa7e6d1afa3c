package kubeapi

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildProgress runs build-kube.sh's progress filter on input.
func buildProgress(t *testing.T, dir, input, what, total string) []string {
	t.Helper()
	script, err := filepath.Abs("progress.sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", `set -euo pipefail; . "$0"; eval "$1" 2>&1 | build_progress "$2" "$3"`, script, input, what, total)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("progress: %v\n%s", err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// TestBuildProgress: a cold Kubernetes build says which binary, how far
// and how long is left at every tenth, and passes errors through; checked
// on a list of package names instead of a 20-minute build.
func TestBuildProgress(t *testing.T) {
	var names []string
	for i := range 40 {
		names = append(names, fmt.Sprintf("k8s.io/kubernetes/pkg/p%d", i))
	}
	input := "printf '%s\\n' " + strings.Join(names, " ") + " '# k8s.io/broken' 'x.go:1:2: undefined: y'"
	lines := buildProgress(t, t.TempDir(), input, "[2/5] kubelet", "40")
	var progress []string
	for _, l := range lines {
		if strings.HasPrefix(l, "build-kube: [2/5] kubelet: ") {
			progress = append(progress, l)
		}
	}
	if len(progress) != 11 {
		t.Errorf("%d progress lines for 40 packages, want the first package's and one per tenth:\n%s", len(progress), strings.Join(lines, "\n"))
	}
	if last := progress[len(progress)-1]; !strings.Contains(last, "40/40 packages (100%)") || !strings.Contains(last, "left") {
		t.Errorf("last line %q, want 40/40 (100%%) with an estimate", last)
	}
	if tail := strings.Join(lines[len(lines)-2:], "\n"); tail != "# k8s.io/broken\nx.go:1:2: undefined: y" {
		t.Errorf("compiler errors not passed through: %q", tail)
	}
}

// TestBuildProgressReadsGoBuild: the filter understands what go build -v
// prints, on a module of two fresh packages.
func TestBuildProgressReadsGoBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go build")
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod":     "module example.com/progress\n\ngo 1.26\n",
		"lib/lib.go": fmt.Sprintf("package lib\n\nconst Name = %q\n", dir),
		"main.go":    "package main\n\nimport \"example.com/progress/lib\"\n\nfunc main() { println(lib.Name) }\n",
	}
	for name, text := range files {
		os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stale, err := exec.Command("bash", "-c", "cd \"$0\" && go list -deps -f '{{if .Stale}}{{.ImportPath}}{{end}}' . | grep -c .", dir).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	lines := buildProgress(t, dir, "go build -v -o "+filepath.Join(dir, "bin")+" .", "[1/1] progress", strings.TrimSpace(string(stale)))
	if last := lines[len(lines)-1]; !strings.Contains(last, "2/2 packages (100%)") {
		t.Errorf("go build -v of two fresh packages ended with %q, want 2/2 (100%%):\n%s", last, strings.Join(lines, "\n"))
	}
}

package image

import (
	"bytes"
	"context"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// fileState is what tells a reused file from a rewritten one.
type fileState struct {
	info os.FileInfo
}

func statFile(t *testing.T, path string) fileState {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fileState{info: info}
}

func (s fileState) same(other fileState) bool {
	return os.SameFile(s.info, other.info) && s.info.ModTime().Equal(other.info.ModTime())
}

func TestWriteCached(t *testing.T) {
	dir := t.TempDir()
	source := filepath.Join(dir, "binary")
	tarball := filepath.Join(dir, "test.tar")
	spec := Spec{Ref: "hwnet.local/test:e2e", Files: []File{{Path: "/binary", Mode: 0o755, Source: source}}}
	setSource := func(t *testing.T, content string) {
		if err := os.WriteFile(source, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		prepare func(t *testing.T)
		reuse   bool
	}{
		{"first write", func(t *testing.T) { setSource(t, "A") }, false},
		{"same inputs", func(t *testing.T) {}, true},
		{"source rewritten with the same content", func(t *testing.T) { setSource(t, "A") }, true},
		{"source changed", func(t *testing.T) { setSource(t, "B") }, false},
		{"source changed back", func(t *testing.T) { setSource(t, "A") }, false},
		{"tarball removed", func(t *testing.T) { os.Remove(tarball) }, false},
		{"stamp removed", func(t *testing.T) { os.Remove(tarball + ".stamp") }, false},
		{"stamp of other inputs", func(t *testing.T) { os.WriteFile(tarball+".stamp", []byte("0123"), 0o644) }, false},
	}
	var before fileState
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.prepare(t)
			if err := writeCached(tarball, spec); err != nil {
				t.Fatalf("writeCached: %v", err)
			}
			after := statFile(t, tarball)
			if i > 0 && after.same(before) != tt.reuse {
				t.Errorf("tarball reused: %v, want %v", !tt.reuse, tt.reuse)
			}
			before = after
			got, err := os.ReadFile(tarball)
			if err != nil {
				t.Fatal(err)
			}
			if want := writeArchive(t, spec); !bytes.Equal(got, want) {
				t.Errorf("tarball differs from what Write gives for the current source")
			}
		})
	}
}

func TestImages(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds hwnet's binaries with go build")
	}
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir := t.TempDir()
	paths, err := Images(ctx, repo, dir)
	if err != nil {
		t.Fatalf("Images: %v", err)
	}
	want := []struct {
		ref, tarball string
		entrypoint   string
		executables  []string
	}{
		{Pause, "pause.tar", "/pause", []string{"pause"}},
		{Workload, "workload.tar", "/workload", []string{"pause", "workload"}},
		{Agent, "agent.tar", "/usr/bin/hwnet-agent", []string{"usr/bin/hwnet", "usr/bin/hwnet-agent", "usr/bin/hwnet-controller", "usr/bin/hwnetctl"}},
	}
	if len(paths) != len(want) {
		t.Fatalf("Images returned %q, want %d tarballs", paths, len(want))
	}
	states := make([]fileState, len(paths))
	for i, w := range want {
		if paths[i] != filepath.Join(dir, w.tarball) {
			t.Errorf("Images()[%d] = %s, want %s", i, paths[i], filepath.Join(dir, w.tarball))
		}
		checkImage(t, paths[i], w.ref, w.entrypoint, w.executables)
		states[i] = statFile(t, paths[i])
	}
	again, err := Images(ctx, repo, dir)
	if err != nil {
		t.Fatalf("second Images: %v", err)
	}
	if !slices.Equal(again, paths) {
		t.Errorf("second Images returned %q, want %q", again, paths)
	}
	for i, path := range again {
		if !statFile(t, path).same(states[i]) {
			t.Errorf("second Images rewrote %s, want it reused", path)
		}
	}
	// make image: the agent's image alone, under a release tag, whose
	// binaries say that release.
	release, err := Release(ctx, repo, dir, "example.com/hwnet:v9")
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	checkImage(t, release, "example.com/hwnet:v9", "/usr/bin/hwnet-agent", []string{"usr/bin/hwnet", "usr/bin/hwnet-agent", "usr/bin/hwnet-controller", "usr/bin/hwnetctl"})
	out, err := exec.Command(filepath.Join(dir, "bin", "hwnet-agent"), "--version").CombinedOutput()
	if want := describe(ctx, repo); err != nil || !strings.Contains(string(out), want) {
		t.Errorf("hwnet-agent --version: %v, %q; want git describe's %q", err, out, want)
	}
}

// checkImage checks that the tarball at path is an importable image ref
// whose entrypoint and executables are static Linux binaries.
func checkImage(t *testing.T, path, ref, entrypoint string, executables []string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	img := loadArchive(t, data)
	if !slices.Equal(img.repoTags, []string{ref}) {
		t.Errorf("%s: RepoTags %q, want [%q]", path, img.repoTags, ref)
	}
	if got := img.config.Config.Entrypoint; !slices.Equal(got, []string{entrypoint}) {
		t.Errorf("%s: Entrypoint %q, want [%q]", path, got, entrypoint)
	}
	if m, ok := findMember(img.layer, "etc/passwd"); !ok || !bytes.HasPrefix(m.data, []byte("root:x:0:0:")) {
		t.Errorf("%s: /etc/passwd %q, want a root entry", path, m.data)
	}
	for _, name := range executables {
		m, ok := findMember(img.layer, name)
		if !ok {
			t.Errorf("%s: no /%s in the layer %v", path, name, memberNames(img.layer))
			continue
		}
		if m.header.Mode != 0o755 {
			t.Errorf("%s: /%s mode %o, want 755", path, name, m.header.Mode)
		}
		checkBinary(t, path+":/"+name, m.data)
	}
}

// checkBinary checks that an image's executable is static and leaves
// out text/template: linked in (by grpc's golang.org/x/net/trace, without
// BuildTags), its calls by method name make the linker keep every
// exported method of every type, which the agent then maps and faults in
// (docs/performance.md, issue 43's seventh round).
func checkBinary(t *testing.T, name string, binary []byte) {
	t.Helper()
	exe, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Errorf("%s: not an ELF binary: %v", name, err)
		return
	}
	for _, prog := range exe.Progs {
		if prog.Type == elf.PT_INTERP {
			t.Errorf("%s: has a program interpreter, want a static binary", name)
		}
	}
	symbols, err := exe.Symbols()
	if err != nil {
		t.Errorf("%s: symbols: %v", name, err)
		return
	}
	for _, s := range symbols {
		if strings.HasPrefix(s.Name, "text/template.") {
			t.Errorf("%s: links text/template (%s); want it built with -tags %s", name, s.Name, BuildTags)
			return
		}
	}
}

func BenchmarkImagesWarm(b *testing.B) {
	if testing.Short() {
		b.Skip("-short: builds hwnet's binaries with go build")
	}
	repo, err := filepath.Abs("../../..")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if _, err := Images(b.Context(), repo, dir); err != nil {
		b.Fatalf("Images: %v", err)
	}
	for b.Loop() {
		if _, err := Images(b.Context(), repo, dir); err != nil {
			b.Fatalf("Images: %v", err)
		}
	}
}

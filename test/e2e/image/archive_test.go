package image

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// member is one entry of a tar archive.
type member struct {
	header tar.Header
	data   []byte
}

func readTar(t testing.TB, data []byte) []member {
	t.Helper()
	var members []member
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return members
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read tar member %s: %v", hdr.Name, err)
		}
		members = append(members, member{header: *hdr, data: content})
	}
}

func findMember(members []member, name string) (member, bool) {
	for _, m := range members {
		if m.header.Name == name {
			return m, true
		}
	}
	return member{}, false
}

// loadedImage is what an importer reads from a docker-archive.
type loadedImage struct {
	repoTags []string
	config   imageConfig
	layer    []member
}

// loadArchive reads a docker-archive as containerd's importer does and
// checks what makes one importable: manifest.json names a config and
// layers present in the archive, the config's name is its sha256, and
// its diff IDs are the sha256 of the uncompressed layers.
func loadArchive(t testing.TB, archive []byte) loadedImage {
	t.Helper()
	members := readTar(t, archive)
	manifestMember, ok := findMember(members, "manifest.json")
	if !ok {
		t.Fatalf("archive has no manifest.json")
	}
	var manifest []map[string]json.RawMessage
	if err := json.Unmarshal(manifestMember.data, &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json %s: want a list of one image (%v)", manifestMember.data, err)
	}
	if keys := slices.Sorted(maps.Keys(manifest[0])); !slices.Equal(keys, []string{"Config", "Layers", "RepoTags"}) {
		t.Errorf("manifest.json keys %q, want Config, Layers, RepoTags", keys)
	}
	var entries []manifestEntry
	if err := json.Unmarshal(manifestMember.data, &entries); err != nil {
		t.Fatal(err)
	}
	entry := entries[0]
	configMember, ok := findMember(members, entry.Config)
	if !ok {
		t.Fatalf("manifest.json Config %q: not in the archive", entry.Config)
	}
	if want := hexSHA256(configMember.data) + ".json"; entry.Config != want {
		t.Errorf("manifest.json Config %q, want the config's sha256 %q", entry.Config, want)
	}
	var config imageConfig
	if err := json.Unmarshal(configMember.data, &config); err != nil {
		t.Fatalf("config %s: %v", configMember.data, err)
	}
	if len(entry.Layers) != 1 {
		t.Fatalf("manifest.json Layers %q, want one", entry.Layers)
	}
	layerMember, ok := findMember(members, entry.Layers[0])
	if !ok {
		t.Fatalf("manifest.json Layers[0] %q: not in the archive", entry.Layers[0])
	}
	digest := hexSHA256(layerMember.data)
	if entry.Layers[0] != digest+"/layer.tar" {
		t.Errorf("manifest.json Layers[0] %q, want %s/layer.tar", entry.Layers[0], digest)
	}
	if want := (rootFS{Type: "layers", DiffIDs: []string{"sha256:" + digest}}); !slices.Equal(config.RootFS.DiffIDs, want.DiffIDs) || config.RootFS.Type != want.Type {
		t.Errorf("config rootfs %+v, want %+v", config.RootFS, want)
	}
	return loadedImage{repoTags: entry.RepoTags, config: config, layer: readTar(t, layerMember.data)}
}

func hexSHA256(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func writeArchive(t testing.TB, s Spec) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, s); err != nil {
		t.Fatalf("Write: %v", err)
	}
	return buf.Bytes()
}

// layerFile is what a test expects of one member of the layer.
type layerFile struct {
	name string
	mode fs.FileMode
	dir  bool
	data string
}

func TestWrite(t *testing.T) {
	source := filepath.Join(t.TempDir(), "tool")
	if err := os.WriteFile(source, []byte("\x7fELF tool"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		spec       Spec
		wantConfig containerConfig
		wantArch   string
		wantLayer  []layerFile
	}{{
		name: "data, source and empty files",
		spec: Spec{Ref: "hwnet.local/test:e2e", Architecture: "amd64",
			Entrypoint: []string{"/usr/bin/tool"}, Cmd: []string{"--flag"}, Env: []string{"PATH=/usr/bin", "A="},
			Files: []File{
				{Path: "/usr/bin/tool", Mode: 0o755, Source: source},
				{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n")},
				{Path: "/empty", Mode: 0o600},
			}},
		wantConfig: containerConfig{Entrypoint: []string{"/usr/bin/tool"}, Cmd: []string{"--flag"}, Env: []string{"PATH=/usr/bin", "A="}},
		wantArch:   "amd64",
		wantLayer: []layerFile{
			{name: "empty", mode: 0o600},
			{name: "etc/", mode: 0o755, dir: true},
			{name: "etc/passwd", mode: 0o644, data: "root:x:0:0:root:/root:/sbin/nologin\n"},
			{name: "usr/", mode: 0o755, dir: true},
			{name: "usr/bin/", mode: 0o755, dir: true},
			{name: "usr/bin/tool", mode: 0o755, data: "\x7fELF tool"},
		},
	}, {
		name:       "default architecture, no files",
		spec:       Spec{Ref: "scratch:latest"},
		wantArch:   runtime.GOARCH,
		wantConfig: containerConfig{},
	}, {
		name:      "deep path",
		spec:      Spec{Ref: "deep", Files: []File{{Path: "/a/b/c/d", Mode: 0o4, Data: []byte("d")}}},
		wantArch:  runtime.GOARCH,
		wantLayer: []layerFile{{name: "a/", mode: 0o755, dir: true}, {name: "a/b/", mode: 0o755, dir: true}, {name: "a/b/c/", mode: 0o755, dir: true}, {name: "a/b/c/d", mode: 0o4, data: "d"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			img := loadArchive(t, writeArchive(t, tt.spec))
			if !slices.Equal(img.repoTags, []string{tt.spec.Ref}) {
				t.Errorf("RepoTags %q, want [%q]", img.repoTags, tt.spec.Ref)
			}
			if img.config.Architecture != tt.wantArch || img.config.OS != "linux" {
				t.Errorf("config platform %s/%s, want linux/%s", img.config.OS, img.config.Architecture, tt.wantArch)
			}
			if got := img.config.Config; !slices.Equal(got.Entrypoint, tt.wantConfig.Entrypoint) ||
				!slices.Equal(got.Cmd, tt.wantConfig.Cmd) || !slices.Equal(got.Env, tt.wantConfig.Env) {
				t.Errorf("config %+v, want %+v", got, tt.wantConfig)
			}
			checkLayer(t, img.layer, tt.wantLayer)
		})
	}
}

func checkLayer(t *testing.T, layer []member, want []layerFile) {
	t.Helper()
	if len(layer) != len(want) {
		t.Errorf("layer has %d members, want %d: %v", len(layer), len(want), memberNames(layer))
	}
	for i := range min(len(layer), len(want)) {
		hdr, w := layer[i].header, want[i]
		wantType := byte(tar.TypeReg)
		if w.dir {
			wantType = tar.TypeDir
		}
		if hdr.Name != w.name || hdr.Typeflag != wantType || fs.FileMode(hdr.Mode) != w.mode || string(layer[i].data) != w.data {
			t.Errorf("layer member %d: %s type %c mode %v content %q, want %s type %c mode %v content %q",
				i, hdr.Name, hdr.Typeflag, fs.FileMode(hdr.Mode), layer[i].data, w.name, wantType, w.mode, w.data)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("layer member %s: owner %d:%d mtime %v, want 0:0 and the epoch", hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime)
		}
	}
}

func memberNames(members []member) []string {
	var names []string
	for _, m := range members {
		names = append(names, m.header.Name)
	}
	return names
}

func TestWriteIsDeterministic(t *testing.T) {
	files := []File{
		{Path: "/pause", Mode: 0o755, Data: []byte("pause")},
		{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/sbin/nologin\n")},
	}
	base := Spec{Ref: "hwnet.local/pause:e2e", Entrypoint: []string{"/pause"}, Files: files}
	reordered := base
	reordered.Files = []File{files[1], files[0]}
	changed := base
	changed.Files = []File{files[0], {Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/bin/sh\n")}}
	first := writeArchive(t, base)
	tests := []struct {
		name string
		spec Spec
		same bool
	}{
		{"same spec", base, true},
		{"files in another order", reordered, true},
		{"other content", changed, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := writeArchive(t, tt.spec); bytes.Equal(got, first) != tt.same {
				t.Errorf("Write gave identical bytes: %v, want %v", !tt.same, tt.same)
			}
		})
	}
}

func TestWriteRejects(t *testing.T) {
	dir := t.TempDir()
	file := func(path string) File { return File{Path: path, Mode: 0o644} }
	tests := []struct {
		name string
		spec Spec
		want []string // parts of the error: the field and its value
	}{
		{"empty Ref", Spec{}, []string{"Ref", `""`}},
		{"Ref with a space", Spec{Ref: "a b:c"}, []string{"Ref", `"a b:c"`}},
		{"relative path", Spec{Ref: "r", Files: []File{file("usr/bin/x")}}, []string{"Files[0].Path", `"usr/bin/x"`, "not absolute"}},
		{"NUL in path", Spec{Ref: "r", Files: []File{file("/a\x00b")}}, []string{"Files[0].Path", `"/a\x00b"`, "NUL"}},
		{"root path", Spec{Ref: "r", Files: []File{file("/")}}, []string{"Files[0].Path", `"/"`}},
		{"unclean path", Spec{Ref: "r", Files: []File{file("/usr//bin/../x")}}, []string{"Files[0].Path", `"/usr//bin/../x"`, `"/usr/x"`}},
		{"duplicate path", Spec{Ref: "r", Files: []File{file("/a"), file("/b"), file("/a")}}, []string{"Files[2].Path", `"/a"`, "Files[0]"}},
		{"file under a file", Spec{Ref: "r", Files: []File{file("/bin/sh"), file("/bin")}}, []string{"Files[0].Path", `"/bin/sh"`, "Files[1]"}},
		{"mode with type bits", Spec{Ref: "r", Files: []File{{Path: "/d", Mode: fs.ModeDir | 0o755}}}, []string{"Files[0].Mode", "drwxr-xr-x"}},
		{"data and source", Spec{Ref: "r", Files: []File{{Path: "/x", Data: []byte("x"), Source: "/bin/true"}}}, []string{"Files[0].Source", `"/bin/true"`, "Data"}},
		{"missing source", Spec{Ref: "r", Files: []File{{Path: "/x", Source: filepath.Join(dir, "missing")}}}, []string{"Files[0].Source", filepath.Join(dir, "missing"), "no such file"}},
		{"directory source", Spec{Ref: "r", Files: []File{{Path: "/x", Source: dir}}}, []string{"Files[0].Source", dir, "not a regular file"}},
		{"Env without =", Spec{Ref: "r", Env: []string{"A=1", "PATH"}}, []string{"Env[1]", `"PATH"`, "KEY=VALUE"}},
		{"Env without key", Spec{Ref: "r", Env: []string{"=1"}}, []string{"Env[0]", `"=1"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			err := Write(&buf, tt.spec)
			if err == nil {
				t.Fatalf("Write(%+v) succeeded, want an error naming %q", tt.spec, tt.want)
			}
			for _, part := range tt.want {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("Write error %q, want it to contain %q", err, part)
				}
			}
			if buf.Len() != 0 {
				t.Errorf("Write wrote %d bytes before failing validation, want none", buf.Len())
			}
		})
	}
}

// FuzzWrite checks that Write either rejects a file or writes an
// importable archive holding it.
func FuzzWrite(f *testing.F) {
	f.Add("/pause", uint32(0o755), []byte("pause"))
	f.Add("/usr/bin/hwnet", uint32(0o700), []byte{})
	f.Add("relative", uint32(0o644), []byte("x"))
	f.Add("/a/../b", uint32(0o644), []byte("x"))
	f.Add("/etc/passwd", uint32(0o644), []byte("duplicate"))
	f.Add("/etc", uint32(0o644), []byte("parent of a file"))
	f.Add("/d", uint32(fs.ModeDir|0o755), []byte(nil))
	f.Add("/\x00", uint32(0o644), []byte("NUL"))
	f.Fuzz(func(t *testing.T, path string, mode uint32, data []byte) {
		passwd := File{Path: "/etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0::/:/sbin/nologin\n")}
		s := Spec{Ref: "hwnet.local/fuzz:e2e", Files: []File{passwd, {Path: path, Mode: fs.FileMode(mode), Data: data}}}
		var buf bytes.Buffer
		if err := Write(&buf, s); err != nil {
			if !strings.Contains(err.Error(), "Files[") {
				t.Fatalf("Write error %q names no file", err)
			}
			return
		}
		img := loadArchive(t, buf.Bytes())
		m, ok := findMember(img.layer, path[1:])
		if !ok || !bytes.Equal(m.data, data) || fs.FileMode(m.header.Mode) != fs.FileMode(mode) {
			t.Fatalf("layer %v lacks %s with mode %v and its %d bytes", memberNames(img.layer), path, fs.FileMode(mode), len(data))
		}
	})
}

package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/test/vnodetest"
)

// layout is an OCI image layout tarball read back: its files by name.
type layout map[string][]byte

func readLayout(t *testing.T, data []byte) layout {
	t.Helper()
	out := layout{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if out[h.Name], err = io.ReadAll(tr); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// blob is the blob d names, checked against its digest and size.
func (l layout) blob(t *testing.T, d ociDescriptor) []byte {
	t.Helper()
	data, ok := l["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok || "sha256:"+sha256Hex(data) != d.Digest || int64(len(data)) != d.Size {
		t.Fatalf("blob %s (%d bytes): missing, or its content does not match", d.Digest, d.Size)
	}
	return data
}

func (l layout) decode(t *testing.T, d ociDescriptor, v any) {
	t.Helper()
	if err := json.Unmarshal(l.blob(t, d), v); err != nil {
		t.Fatalf("%s %s: %v", d.MediaType, d.Digest, err)
	}
}

// platformImages follows the layout's index.json to ref's image index and
// returns each platform's manifest descriptor.
func (l layout) platformImages(t *testing.T, ref string) []ociDescriptor {
	t.Helper()
	if string(l["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout: %q", l["oci-layout"])
	}
	var top, index ociIndexDoc
	if err := json.Unmarshal(l["index.json"], &top); err != nil || len(top.Manifests) != 1 {
		t.Fatalf("index.json: %s (%v), want one image", l["index.json"], err)
	}
	if d := top.Manifests[0]; d.MediaType != mediaIndex || d.Annotations[ociRefName] != ref {
		t.Errorf("index.json names %+v, want an image index named %s", d, ref)
	}
	l.decode(t, top.Manifests[0], &index)
	return index.Manifests
}

// layerFile is the content of the file name in the image's one layer.
func (l layout) layerFile(t *testing.T, m ociManifestDoc, name string) []byte {
	t.Helper()
	tr := tar.NewReader(bytes.NewReader(l.blob(t, m.Layers[0])))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the layer: %v", name, err)
		}
		if h.Name == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
	}
}

// TestWriteIndex: one image for two CPUs is an OCI image layout whose
// index names the image and lists each CPU's manifest with its platform;
// each config says its CPU, each layer holds that CPU's files, and every
// blob matches its digest.
func TestWriteIndex(t *testing.T) {
	specs := []Spec{
		{Architecture: "amd64", Entrypoint: []string{"/app"}, Files: []File{{Path: "/app", Mode: 0o755, Data: []byte("amd64 app")}}},
		{Architecture: "arm64", Entrypoint: []string{"/app"}, Files: []File{{Path: "/app", Mode: 0o755, Data: []byte("arm64 app")}}},
	}
	var buf bytes.Buffer
	if err := WriteIndex(&buf, "example.com/hwnet:v9", specs); err != nil {
		t.Fatal(err)
	}
	l := readLayout(t, buf.Bytes())
	images := l.platformImages(t, "example.com/hwnet:v9")
	if len(images) != 2 {
		t.Fatalf("%d platforms, want 2", len(images))
	}
	for i, d := range images {
		arch := specs[i].Architecture
		if d.MediaType != mediaManifest || d.Platform == nil || *d.Platform != (ociPlatform{Architecture: arch, OS: "linux"}) {
			t.Errorf("platform %d: %+v, want a manifest for linux/%s", i, d, arch)
		}
		var m ociManifestDoc
		l.decode(t, d, &m)
		var cfg imageConfig
		l.decode(t, m.Config, &cfg)
		if cfg.Architecture != arch || cfg.OS != "linux" || len(m.Layers) != 1 || m.Layers[0].MediaType != mediaLayer {
			t.Errorf("%s: config %+v, layers %+v", arch, cfg, m.Layers)
		}
		if got := string(l.layerFile(t, m, "app")); got != arch+" app" {
			t.Errorf("%s: /app holds %q", arch, got)
		}
	}
}

// TestReleaseIndexRunsOnArm64: the CNI shim (hwnet, which the agent
// installs on every node) cross-compiled for arm64, taken from the arm64
// image of the index as a runtime of an arm64 node would, runs (under
// qemu's user-mode emulation on another CPU) and says its version. The
// shim, not the agent: it compiles cold in seconds, the agent in minutes.
func TestReleaseIndexRunsOnArm64(t *testing.T) {
	qemu, err := exec.LookPath("qemu-aarch64-static")
	if err != nil {
		vnodetest.Unavailable(t, "qemu-aarch64-static (Debian's qemu-user-static, make deps) runs the arm64 binaries: "+err.Error())
	}
	repo, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := t.TempDir()
	if err := buildBinaries(ctx, repo, bin, "arm64", []string{"./cmd/hwnet"}); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Architecture: "arm64", Files: []File{executable(bin, "/usr/bin/hwnet", "hwnet")}}
	var buf bytes.Buffer
	if err := WriteIndex(&buf, "example.com/hwnet:v9", []Spec{spec}); err != nil {
		t.Fatal(err)
	}
	l := readLayout(t, buf.Bytes())
	images := l.platformImages(t, "example.com/hwnet:v9")
	if len(images) != 1 || images[0].Platform == nil || images[0].Platform.Architecture != "arm64" {
		t.Fatalf("platforms %+v, want arm64", images)
	}
	var m ociManifestDoc
	l.decode(t, images[0], &m)
	exe := filepath.Join(t.TempDir(), "hwnet")
	if err := os.WriteFile(exe, l.layerFile(t, m, "usr/bin/hwnet"), 0o755); err != nil {
		t.Fatal(err)
	}
	if f, err := elf.Open(exe); err != nil || f.Machine != elf.EM_AARCH64 {
		t.Fatalf("the arm64 image's hwnet: %v, want an aarch64 ELF executable (%v)", f, err)
	}
	out, err := exec.CommandContext(ctx, qemu, exe, "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hwnet CNI plugin ") {
		t.Fatalf("the arm64 hwnet --version under %s: %v: %s", qemu, err, out)
	}
}

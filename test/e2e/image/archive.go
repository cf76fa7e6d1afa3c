// Package image builds the container images of hwnet's end-to-end cluster.
// No registry is reachable there, so each image is a docker-archive tarball
// (what `docker save` writes) for `ctr -n k8s.io images import`, written with
// the standard library from binaries built out of this repository.
package image

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"path"
	"runtime"
)

// File is one regular file of an image. Its content is Data, or the
// content of the host file Source when Source is set.
type File struct {
	Path   string      // absolute and clean, e.g. /usr/bin/hwnet-agent
	Mode   fs.FileMode // permission bits only
	Data   []byte
	Source string
}

// Spec describes a single-layer image.
type Spec struct {
	Ref          string // the name the import tags, e.g. hwnet.local/pause:e2e
	Architecture string // GOARCH of the binaries; runtime.GOARCH when empty
	Files        []File
	Entrypoint   []string
	Cmd          []string
	Env          []string // KEY=VALUE
}

// manifestEntry is one image of a docker-archive's manifest.json.
type manifestEntry struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// imageConfig is the part of the Docker image config (the OCI image
// config's ancestor) a runtime needs to run the image.
type imageConfig struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       containerConfig `json:"config"`
	RootFS       rootFS          `json:"rootfs"`
}

type containerConfig struct {
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	Env        []string `json:"Env,omitempty"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// Write writes s to w as a docker-archive: the layer tar under
// <diff ID>/layer.tar, the config under <config digest>.json and
// manifest.json naming both with s.Ref as tag. Identical specs (and Source
// contents) give identical bytes.
func Write(w io.Writer, s Spec) error {
	entries, err := s.layerEntries()
	if err != nil {
		return err
	}
	layerDigest, layerSize, err := measureLayer(entries)
	if err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	config, err := json.Marshal(s.config(layerDigest))
	if err != nil {
		return fmt.Errorf("image %s: config: %w", s.Ref, err)
	}
	configName := sha256Hex(config) + ".json"
	layerName := layerDigest + "/layer.tar"
	manifest, err := json.Marshal([]manifestEntry{{Config: configName, RepoTags: []string{s.Ref}, Layers: []string{layerName}}})
	if err != nil {
		return fmt.Errorf("image %s: manifest: %w", s.Ref, err)
	}
	tw := tar.NewWriter(w)
	if err := writeArchiveLayer(tw, layerName, layerDigest, layerSize, entries); err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	if err := writeRegular(tw, configName, 0o644, config); err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	if err := writeRegular(tw, "manifest.json", 0o644, manifest); err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image %s: %w", s.Ref, err)
	}
	return nil
}

func (s Spec) config(layerDigest string) imageConfig {
	arch := s.Architecture
	if arch == "" {
		arch = runtime.GOARCH
	}
	return imageConfig{
		Architecture: arch,
		OS:           "linux",
		Config:       containerConfig{Entrypoint: s.Entrypoint, Cmd: s.Cmd, Env: s.Env},
		RootFS:       rootFS{Type: "layers", DiffIDs: []string{"sha256:" + layerDigest}},
	}
}

// writeArchiveLayer writes the layer tar into the archive, checking that
// it is the layer measureLayer saw: a Source that changed in between would
// otherwise leave a config whose diff ID no runtime can verify.
func writeArchiveLayer(tw *tar.Writer, name, digest string, size int64, entries []layerEntry) error {
	if err := tw.WriteHeader(dirHeader(path.Dir(name) + "/")); err != nil {
		return err
	}
	if err := tw.WriteHeader(regularHeader(name, 0o644, size)); err != nil {
		return err
	}
	return checkedLayer(tw, digest, entries)
}

// checkedLayer writes the layer tar to w and fails if its digest is not
// digest.
func checkedLayer(w io.Writer, digest string, entries []layerEntry) error {
	hash := sha256.New()
	if err := writeLayer(io.MultiWriter(w, hash), entries); err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	if got := hex.EncodeToString(hash.Sum(nil)); got != digest {
		return fmt.Errorf("layer changed while writing (sha256 %s, then %s): a Source file was modified", digest, got)
	}
	return nil
}

func writeRegular(tw *tar.Writer, name string, mode fs.FileMode, data []byte) error {
	if err := tw.WriteHeader(regularHeader(name, mode, int64(len(data)))); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

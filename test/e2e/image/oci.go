package image

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
)

// OCI media types of an image layout (image-spec v1.1).
const (
	mediaIndex    = "application/vnd.oci.image.index.v1+json"
	mediaManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaConfig   = "application/vnd.oci.image.config.v1+json"
	mediaLayer    = "application/vnd.oci.image.layer.v1.tar"
	// ociRefName names the image an index.json entry is (ctr, skopeo and
	// podman tag it so on import).
	ociRefName = "org.opencontainers.image.ref.name"
)

type ociDescriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type ociIndexDoc struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Manifests     []ociDescriptor `json:"manifests"`
}

type ociManifestDoc struct {
	SchemaVersion int             `json:"schemaVersion"`
	MediaType     string          `json:"mediaType"`
	Config        ociDescriptor   `json:"config"`
	Layers        []ociDescriptor `json:"layers"`
}

// WriteIndex writes one image for several platforms, tagged ref, to w as
// an OCI image layout tarball: an image index (a manifest list) naming
// each spec's manifest with its platform (Spec.Architecture, linux); the
// specs' own Ref is not used.
// Runtimes pull the image of their own CPU from it; docker, podman, ctr
// and skopeo load it.
func WriteIndex(w io.Writer, ref string, platforms []Spec) error {
	tw := tar.NewWriter(w)
	if err := tw.WriteHeader(dirHeader("blobs/")); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if err := tw.WriteHeader(dirHeader("blobs/sha256/")); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	var manifests []ociDescriptor
	for _, s := range platforms {
		s.Ref = ref
		d, err := writePlatform(tw, s)
		if err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		manifests = append(manifests, d)
	}
	index, err := writeJSONBlob(tw, mediaIndex, ociIndexDoc{SchemaVersion: 2, MediaType: mediaIndex, Manifests: manifests})
	if err != nil {
		return fmt.Errorf("image %s: index: %w", ref, err)
	}
	index.Annotations = map[string]string{ociRefName: ref}
	top, err := json.Marshal(ociIndexDoc{SchemaVersion: 2, MediaType: mediaIndex, Manifests: []ociDescriptor{index}})
	if err != nil {
		return fmt.Errorf("image %s: index.json: %w", ref, err)
	}
	if err := writeRegular(tw, "oci-layout", 0o644, []byte(`{"imageLayoutVersion":"1.0.0"}`)); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if err := writeRegular(tw, "index.json", 0o644, top); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return nil
}

// writePlatform writes s's layer, config and manifest blobs and returns
// the manifest's descriptor, with s's platform.
func writePlatform(tw *tar.Writer, s Spec) (ociDescriptor, error) {
	entries, err := s.layerEntries()
	if err != nil {
		return ociDescriptor{}, err
	}
	layerDigest, layerSize, err := measureLayer(entries)
	if err != nil {
		return ociDescriptor{}, err
	}
	if err := writeBlobLayer(tw, layerDigest, layerSize, entries); err != nil {
		return ociDescriptor{}, err
	}
	cfg := s.config(layerDigest)
	config, err := writeJSONBlob(tw, mediaConfig, cfg)
	if err != nil {
		return ociDescriptor{}, fmt.Errorf("config: %w", err)
	}
	layer := ociDescriptor{MediaType: mediaLayer, Digest: "sha256:" + layerDigest, Size: layerSize}
	m, err := writeJSONBlob(tw, mediaManifest, ociManifestDoc{SchemaVersion: 2, MediaType: mediaManifest, Config: config, Layers: []ociDescriptor{layer}})
	if err != nil {
		return ociDescriptor{}, fmt.Errorf("manifest: %w", err)
	}
	m.Platform = &ociPlatform{Architecture: cfg.Architecture, OS: cfg.OS}
	return m, nil
}

// writeBlobLayer writes the layer tar as blobs/sha256/<digest>, checking
// it is the layer measureLayer saw, as writeArchiveLayer does.
func writeBlobLayer(tw *tar.Writer, digest string, size int64, entries []layerEntry) error {
	if err := tw.WriteHeader(regularHeader("blobs/sha256/"+digest, 0o644, size)); err != nil {
		return err
	}
	return checkedLayer(tw, digest, entries)
}

// writeJSONBlob writes v, as JSON, as a blob and returns its descriptor.
func writeJSONBlob(tw *tar.Writer, mediaType string, v any) (ociDescriptor, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return ociDescriptor{}, err
	}
	digest := sha256Hex(data)
	if err := writeRegular(tw, "blobs/sha256/"+digest, 0o644, data); err != nil {
		return ociDescriptor{}, err
	}
	return ociDescriptor{MediaType: mediaType, Digest: "sha256:" + digest, Size: int64(len(data))}, nil
}

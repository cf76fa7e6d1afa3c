// Package networkfile is the file format of the CRI network store
// (package cni/crinet): one managed network per file, so that networks
// set through the CRI network API survive agent restarts, upgrades and
// rollbacks.
//
// Versions:
//
//   - unversioned (read as 1): the NetworkConfig alone, in protobuf's
//     JSON mapping.
//   - 2 (current): the NetworkConfig under "network", with a version and
//     a checksum over the network.
//
// Decode reads every version, and a newer one as far as its network's
// fields are known ones, unknown fields dropped and its checksum, whose
// rules are the newer hwnet's, unchecked: a network set before a rollback
// still lists and can still be removed.
package networkfile

import (
	"encoding/json"
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"

	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// Version is the format this hwnet writes.
const Version = 2

// MaxSize is the largest network file read: a network's configuration
// takes a few KiB.
const MaxSize = 1 << 20

// fileFormat is the network file's envelope: a version field, absent
// from the first files.
func fileFormat() fileformat.Format {
	return fileformat.Format{Name: "CRI network file", Current: Version, Unversioned: 1, MaxSize: MaxSize}
}

// File is the file's content in the current version.
type File struct {
	Version int `json:"version"`
	// Checksum is the checksum of Network as written (package fileformat).
	Checksum uint32 `json:"checksum"`
	// Network is a NetworkConfig in protobuf's JSON mapping.
	Network json.RawMessage `json:"network"`
}

// Stored is a network as read from its file.
type Stored struct {
	// Version is the format version the file was written in.
	Version int
	Config  *crinetapi.NetworkConfig
}

// Encode is the network's file content in the current version.
func Encode(cfg *crinetapi.NetworkConfig) ([]byte, error) {
	network, err := protojson.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileFormat().Name, err)
	}
	sum, err := fileformat.Checksum(network)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileFormat().Name, err)
	}
	data, err := json.MarshalIndent(&File{Version: Version, Checksum: sum, Network: network}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", fileFormat().Name, err)
	}
	return data, nil
}

// Load reads and decodes the network file at path; its errors name the
// file.
func Load(path string) (*Stored, error) {
	return fileformat.Load(fileFormat(), path, Decode)
}

// Decode reads a network file of any version. A version it knows must
// be whole: JSON that does not parse or is not a NetworkConfig, or a
// network that does not match the checksum, are an error wrapping
// fileformat.ErrMalformed or fileformat.ErrChecksum.
func Decode(data []byte) (*Stored, error) {
	return fileformat.Decode(fileFormat(), data,
		fileformat.Decoders[*Stored]{Older: decodeUnversioned, Same: decodeCurrent, Newer: decodeNewer})
}

// decodeUnversioned reads version 1, the NetworkConfig alone.
func decodeUnversioned(object []byte, h fileformat.Header) (*Stored, error) {
	return unmarshal(object, h, protojson.UnmarshalOptions{})
}

func decodeCurrent(object []byte, h fileformat.Header) (*Stored, error) {
	network, _, err := fileformat.VerifiedPayload(object, h, "network")
	if err != nil {
		return nil, err
	}
	return unmarshal(network, h, protojson.UnmarshalOptions{})
}

// decodeNewer reads the network of a newer version, dropping the fields
// this version does not know.
func decodeNewer(object []byte, h fileformat.Header) (*Stored, error) {
	network, err := fileformat.Payload(object, "network")
	if err != nil {
		return nil, err
	}
	return unmarshal(network, h, protojson.UnmarshalOptions{DiscardUnknown: true})
}

func unmarshal(network []byte, h fileformat.Header, opts protojson.UnmarshalOptions) (*Stored, error) {
	cfg := &crinetapi.NetworkConfig{}
	if err := opts.Unmarshal(network, cfg); err != nil {
		return nil, fmt.Errorf("%w: not a NetworkConfig: %w", fileformat.ErrMalformed, err)
	}
	return &Stored{Version: h.Version, Config: cfg}, nil
}

package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// Load reads and decodes the checkpoint file at path; its errors name
// the file. A missing file is an error wrapping fs.ErrNotExist.
func Load(path string) (*Checkpoint, error) {
	return fileformat.Load(fileFormat(), path, Decode)
}

// Decode reads a checkpoint of any version into the current type. A
// version it knows must be whole: JSON that does not parse, or claims
// that do not match the checksum, are an error wrapping
// fileformat.ErrMalformed or fileformat.ErrChecksum. A newer version is
// read as far as its fields are the current ones, its checksum, whose
// rules are the newer hwnet's, unchecked.
func Decode(data []byte) (*Checkpoint, error) {
	cp, err := fileformat.Decode(fileFormat(), data,
		fileformat.Decoders[*Checkpoint]{Older: decodeOlder, Same: decodeCurrent, Newer: decodeNewer})
	if err != nil {
		return nil, err
	}
	dropNullClaims(cp)
	return cp, nil
}

// decodeOlder reads version 1, or version 2, the current one without VF
// settings, checksummed the same way.
func decodeOlder(object []byte, h fileformat.Header) (*Checkpoint, error) {
	if h.Version == 2 {
		return decodeCurrent(object, h)
	}
	return decodeV1(object, h)
}

// decodeV1 reads version 1, the current claims without a checksum.
func decodeV1(object []byte, h fileformat.Header) (*Checkpoint, error) {
	var v1 struct {
		Claims map[types.UID]*Claim `json:"claims"`
	}
	if err := json.Unmarshal(object, &v1); err != nil {
		return nil, fmt.Errorf("%w: %w", fileformat.ErrMalformed, err)
	}
	return &Checkpoint{Version: h.Version, Claims: v1.Claims}, nil
}

func decodeCurrent(object []byte, h fileformat.Header) (*Checkpoint, error) {
	claims, sum, err := fileformat.VerifiedPayload(object, h, "claims")
	if err != nil {
		return nil, err
	}
	cp := &Checkpoint{Version: h.Version, Checksum: sum}
	if err := json.Unmarshal(claims, &cp.Claims); err != nil {
		return nil, fmt.Errorf("%w: claims: %w", fileformat.ErrMalformed, err)
	}
	return cp, nil
}

// decodeNewer reads the fields this version knows from a newer one: a
// field whose type changed is left empty rather than failing the rest.
func decodeNewer(object []byte, h fileformat.Header) (*Checkpoint, error) {
	var cp Checkpoint
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(object, &cp); err != nil && !errors.As(err, &typeErr) {
		return nil, fmt.Errorf("%w: %w", fileformat.ErrMalformed, err)
	}
	cp.Version = h.Version
	return &cp, nil
}

// dropNullClaims leaves out claims recorded as null, which hold nothing
// to unprepare, and makes Claims non-nil for the caller to add to.
func dropNullClaims(cp *Checkpoint) {
	if cp.Claims == nil {
		cp.Claims = map[types.UID]*Claim{}
	}
	for uid, c := range cp.Claims {
		if c == nil {
			delete(cp.Claims, uid)
		}
	}
}

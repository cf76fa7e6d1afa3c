// Package fileformat is what hwnet's versioned on-disk JSON files share:
// a size limit, a "version" field and, for files that carry one, a
// checksum over their payload. Each format (package api/...) decides what
// its versions hold; this package only reads the envelope, so that every
// format refuses oversize and torn files with the same errors.
package fileformat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

var (
	// ErrTooLarge marks a file over its format's size limit.
	ErrTooLarge = errors.New("over the size limit")
	// ErrMalformed marks a file that is not the JSON object every version
	// of a format is: torn by a crash or a full disk, or edited.
	ErrMalformed = errors.New("malformed")
	// ErrChecksum marks a file whose payload does not match its checksum.
	ErrChecksum = errors.New("checksum mismatch")
)

// Format describes one on-disk format.
type Format struct {
	// Name names the format in errors, e.g. "DRA checkpoint".
	Name string
	// Current is the version this hwnet writes.
	Current int
	// Unversioned is the version of a file without a version field,
	// written before the format had one; 0 if every file has one.
	Unversioned int
	// MaxSize is the size of the largest file read, in bytes.
	MaxSize int
}

// Header is the part every version of every format shares.
type Header struct {
	// Version is the file's format version, Unversioned if it had none.
	Version int `json:"version"`
	// Checksum is the payload's checksum (see Checksum), as written: a
	// newer version may write another kind, which only it checks.
	Checksum json.RawMessage `json:"checksum,omitempty"`
}

// ReadFile reads the file at path, refusing one over the size limit
// before reading it all.
func (f Format) ReadFile(path string) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Name, err)
	}
	defer file.Close()
	data, err := io.ReadAll(io.LimitReader(file, int64(f.MaxSize)+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", f.Name, path, err)
	}
	if err := f.checkSize(data); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return data, nil
}

// Load reads the file at path with ReadFile and decodes it with decode,
// naming the file in decode's error.
func Load[T any](f Format, path string, decode func([]byte) (T, error)) (T, error) {
	var zero T
	data, err := f.ReadFile(path)
	if err != nil {
		return zero, err
	}
	v, err := decode(data)
	if err != nil {
		return zero, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

func (f Format) checkSize(data []byte) error {
	if len(data) > f.MaxSize {
		return fmt.Errorf("%s: %w: more than %d bytes", f.Name, ErrTooLarge, f.MaxSize)
	}
	return nil
}

// Open checks data against the size limit and returns its first JSON
// value, which must be an object, its header and whatever follows it.
func (f Format) Open(data []byte) (object, rest []byte, h Header, err error) {
	if err := f.checkSize(data); err != nil {
		return nil, nil, Header{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, nil, Header{}, f.malformed(err)
	}
	if raw[0] != '{' {
		return nil, nil, Header{}, f.malformed(errors.New("not a JSON object"))
	}
	if h, err = f.header(raw); err != nil {
		return nil, nil, Header{}, err
	}
	return raw, data[dec.InputOffset():], h, nil
}

// OpenWhole is Open for formats whose file holds one object and nothing
// after it.
func (f Format) OpenWhole(data []byte) ([]byte, Header, error) {
	object, rest, h, err := f.Open(data)
	if err != nil {
		return nil, Header{}, err
	}
	if len(bytes.TrimSpace(rest)) != 0 {
		return nil, Header{}, f.malformed(errors.New("data after the object"))
	}
	return object, h, nil
}

func (f Format) header(object []byte) (Header, error) {
	var h Header
	if err := json.Unmarshal(object, &h); err != nil {
		return Header{}, f.malformed(err)
	}
	if h.Version < 0 {
		return Header{}, f.malformed(fmt.Errorf("version %d", h.Version))
	}
	if h.Version == 0 {
		if f.Unversioned == 0 {
			return Header{}, f.malformed(errors.New("no version"))
		}
		h.Version = f.Unversioned
	}
	return h, nil
}

func (f Format) malformed(err error) error {
	return fmt.Errorf("%s: %w: %w", f.Name, ErrMalformed, err)
}

// Checksum is the CRC-32 (IEEE) of payload's JSON without insignificant
// white space: a file re-indented by hand still matches, one whose
// values changed does not. It detects tearing and edits, not tampering.
func Checksum(payload []byte) (uint32, error) {
	var compact bytes.Buffer
	if err := json.Compact(&compact, payload); err != nil {
		return 0, err
	}
	return crc32.ChecksumIEEE(compact.Bytes()), nil
}

// ChecksumMarshaled is Checksum of a payload as json.Marshal writes it,
// which has no insignificant white space: the same sum without the
// compacting pass, for a file written often (the DRA checkpoint at every
// kubelet call). Not for protojson's output, which adds white space.
func ChecksumMarshaled(payload []byte) uint32 { return crc32.ChecksumIEEE(payload) }

// Payload is the object's field that holds a format's payload, an error
// wrapping ErrMalformed when it is absent.
func Payload(object []byte, field string) (json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(object, &fields); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	payload, ok := fields[field]
	if !ok {
		return nil, fmt.Errorf("%w: no %s", ErrMalformed, field)
	}
	return payload, nil
}

// VerifiedPayload is Payload, checked against the header's checksum;
// it returns the checksum too. A file without a checksum fails.
func VerifiedPayload(object []byte, h Header, field string) (json.RawMessage, uint32, error) {
	payload, err := Payload(object, field)
	if err != nil {
		return nil, 0, err
	}
	var want uint32
	if len(h.Checksum) == 0 {
		return nil, 0, fmt.Errorf("%w: no checksum", ErrChecksum)
	}
	if err := json.Unmarshal(h.Checksum, &want); err != nil {
		return nil, 0, fmt.Errorf("%w: checksum %s: %w", ErrChecksum, h.Checksum, err)
	}
	sum, err := Checksum(payload)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %s: %w", ErrMalformed, field, err)
	}
	if sum != want {
		return nil, 0, fmt.Errorf("%w: the %s sum to %d, the file says %d (torn or edited)", ErrChecksum, field, sum, want)
	}
	return payload, sum, nil
}

// Decoders read a format's object, of each kind of version, into T.
type Decoders[T any] struct {
	// Older reads a version before Format.Current, Same the current
	// one, Newer one after it, as far as it can.
	Older, Same, Newer func(object []byte, h Header) (T, error)
}

// Decode reads data, a file holding one object, with the decoder its
// version needs. Its errors name the format and the version.
func Decode[T any](f Format, data []byte, d Decoders[T]) (T, error) {
	var zero T
	object, h, err := f.OpenWhole(data)
	if err != nil {
		return zero, err
	}
	decode := d.Same
	if h.Version < f.Current {
		decode = d.Older
	} else if h.Version > f.Current {
		decode = d.Newer
	}
	v, err := decode(object, h)
	if err != nil {
		return zero, fmt.Errorf("%s: version %d: %w", f.Name, h.Version, err)
	}
	return v, nil
}

// LoadDir loads each regular "*.json" file in dir with load, in name
// order; a missing directory holds none. A file removed once listed is
// not there: its writer took it back. Any other file that cannot be
// loaded is an error naming it: whatever it holds is not known.
func LoadDir[T any](dir string, load func(path string) (T, error)) ([]T, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []T
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || !e.Type().IsRegular() {
			continue
		}
		v, err := load(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// Package agentrestart is the file an agent that stops leaves beside its
// CNI socket: the agent is going away and expects to be back by a time
// (its stop plus the shim's agentWait), while the shim's ADDs wait for
// it. The shim's CNI STATUS reads it when the socket does not answer and
// tells the runtime the plugin is ready until then: an agent rolled out
// anew, or restarted for a new flag, would otherwise turn the node
// NotReady for the seconds its successor takes to serve, and the node
// lifecycle controller would taint it not-ready (NoSchedule and
// NoExecute) on every upgrade. An agent that serves removes the file;
// one that dies without stopping leaves none, so the node turns NotReady
// as before.
//
// Versions:
//
//   - 1 (current): when the agent stopped and until when it expects to
//     be back. No checksum: the file is written whole through a rename,
//     and one that cannot be read counts as absent (the node NotReady).
//
// Decode reads a newer version as far as its fields are the current
// ones.
package agentrestart

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/hwnet-io/hwnet/internal/atomicfile"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// Version is the format this hwnet writes.
const Version = 1

// MaxSize is the largest file read: a notice takes some 100 bytes.
const MaxSize = 4 << 10

func fileFormat() fileformat.Format {
	return fileformat.Format{Name: "agent restart notice", Current: Version, MaxSize: MaxSize}
}

// Path is the notice's file for the agent serving the CNI socket at
// socketPath: beside it, so it shares the socket's directory and its
// access (root only) and goes with it on a reboot (/run).
func Path(socketPath string) string { return socketPath + ".restarting" }

// Notice is an agent's word that it is restarting.
type Notice struct {
	// Stopped is when the agent stopped serving.
	Stopped time.Time `json:"stopped"`
	// Until is when the agent expects to serve again; the shim's STATUS
	// says the plugin is not available after it.
	Until time.Time `json:"until"`
}

// Validate checks what every reader relies on: both times, Until not
// before Stopped.
func (n *Notice) Validate() error {
	switch {
	case n.Stopped.IsZero():
		return errors.New("stopped: empty")
	case n.Until.IsZero():
		return errors.New("until: empty")
	case n.Until.Before(n.Stopped):
		return fmt.Errorf("until %s: before stopped %s", n.Until.Format(time.RFC3339Nano), n.Stopped.Format(time.RFC3339Nano))
	}
	return nil
}

// Expects reports whether the notice still expects the agent back at now.
func (n *Notice) Expects(now time.Time) bool { return now.Before(n.Until) }

// Encode is the file content in the current version.
func Encode(n *Notice) ([]byte, error) {
	if err := n.Validate(); err != nil {
		return nil, fmt.Errorf("agent restart notice: %w", err)
	}
	file := struct {
		Version int `json:"version"`
		Notice
	}{Version, *n}
	return json.Marshal(&file)
}

// Decode reads a notice; a newer version is read as far as its fields
// are known.
func Decode(data []byte) (*Notice, error) {
	n, err := fileformat.Decode(fileFormat(), data, fileformat.Decoders[*Notice]{
		Older: func([]byte, fileformat.Header) (*Notice, error) { return nil, errors.New("no such version") },
		Same:  decodeObject, Newer: decodeObject,
	})
	if err != nil {
		return nil, err
	}
	if err := n.Validate(); err != nil {
		return nil, fmt.Errorf("agent restart notice: %w: %w", fileformat.ErrMalformed, err)
	}
	return n, nil
}

func decodeObject(object []byte, _ fileformat.Header) (*Notice, error) {
	var n Notice
	if err := json.Unmarshal(object, &n); err != nil {
		return nil, fmt.Errorf("%w: %w", fileformat.ErrMalformed, err)
	}
	return &n, nil
}

// Load reads the notice at path: nil and no error when there is none.
func Load(path string) (*Notice, error) {
	n, err := fileformat.Load(fileFormat(), path, Decode)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return n, err
}

// Leave writes n at path, whole or not at all.
func Leave(path string, n *Notice) error {
	data, err := Encode(n)
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return fmt.Errorf("agent restart notice: %w", err)
	}
	return nil
}

// Withdraw removes the notice at path, if any.
func Withdraw(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("agent restart notice: %w", err)
	}
	return nil
}

// Package formattest helps test hwnet's on-disk formats and their
// readers: it checks a Decode against files it must refuse, so that each
// format's tests list only the files, and rewrites a file as another
// version would have written it.
package formattest

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

// Refusal is a file a Decode must refuse.
type Refusal struct {
	Name string
	Data []byte
	// Is is the error the refusal wraps (package fileformat's).
	Is error
	// Want is a part of the error's text.
	Want string
}

// Refused runs decode on each refusal's file, in a subtest: it must
// fail with an error wrapping Is that holds Want and the format's name.
func Refused[T any](t *testing.T, formatName string, decode func([]byte) (T, error), refusals []Refusal) {
	t.Helper()
	for _, r := range refusals {
		t.Run(r.Name, func(t *testing.T) {
			_, err := decode(r.Data)
			if !errors.Is(err, r.Is) || !strings.Contains(err.Error(), r.Want) || !strings.Contains(err.Error(), formatName) {
				t.Errorf("got %v, want %v containing %q and %q", err, r.Is, r.Want, formatName)
			}
		})
	}
}

// Oversize is the start of a JSON object longer than max bytes.
func Oversize(max int) []byte {
	return append([]byte(`{"version":1,"pad":"`), bytes.Repeat([]byte("x"), max)...)
}

// RewriteJSON rewrites the JSON object in the file at path with rewrite,
// as another version of hwnet, or a hand, would have written it.
func RewriteJSON(t testing.TB, path string, rewrite func(object map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var object map[string]any
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&object); err != nil {
		t.Fatal(err)
	}
	rewrite(object)
	if data, err = json.Marshal(object); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

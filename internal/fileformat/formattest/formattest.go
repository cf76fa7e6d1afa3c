// Package formattest checks a format's Decode against files it must
// refuse, so that each format's tests list only the files.
package formattest

import (
	"bytes"
	"errors"
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

package selection

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// FieldError is one problem in the networks annotation. Parse joins one per
// problem with errors.Join; callers that build pod Events can walk them.
type FieldError struct {
	// Source names what held the list when it is not the networks
	// annotation, e.g. a ResourceClaim's configuration; empty for the
	// annotation.
	Source string
	// Index is the element's position in the list, counted from 0, or -1 when the
	// problem is the annotation as a whole (not JSON, not a list).
	Index int
	// Network is the element's "name" when that name is valid, else empty.
	Network string
	// Key is the offending key, with a path into nested values ("ips[1]",
	// "portMappings[0].hostPort", "cni-args.deviceID"); empty for the element itself.
	Key string
	// Value is the offending value as written (JSON text, so strings keep their
	// quotes), shortened past 64 bytes; empty when the key is missing.
	Value string
	// Reason says what is wrong.
	Reason string
}

func (e *FieldError) Error() string {
	var b strings.Builder
	if e.Source != "" {
		b.WriteString(e.Source)
	} else {
		b.WriteString("networks annotation")
	}
	if e.Index >= 0 {
		fmt.Fprintf(&b, " element %d", e.Index)
		if e.Network != "" {
			fmt.Fprintf(&b, " (%q)", e.Network)
		}
	}
	b.WriteString(": ")
	if e.Key != "" {
		b.WriteString(strconv.Quote(e.Key))
		if e.Value != "" {
			b.WriteByte(' ')
		}
	}
	b.WriteString(e.Value)
	if e.Key != "" || e.Value != "" {
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// maxShownValue bounds the value an error repeats, since the annotation is the
// pod author's and the error ends up in Events and logs.
const maxShownValue = 64

// showJSON renders a valid JSON value for an error message on one line.
func showJSON(raw []byte) string {
	if bytes.ContainsAny(raw, "\n\r\t") {
		var compact bytes.Buffer
		if json.Compact(&compact, raw) == nil {
			raw = compact.Bytes()
		}
	}
	return shorten(string(raw))
}

// showText renders a comma-format value for an error message.
func showText(s string) string {
	return shorten(strconv.Quote(s))
}

func shorten(s string) string {
	if len(s) <= maxShownValue {
		return s
	}
	cut := maxShownValue
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

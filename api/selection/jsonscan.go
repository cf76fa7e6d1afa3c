package selection

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The annotation is checked with json.Valid once; these helpers then walk the
// valid text in place. Walking keeps key order (so errors come out in the order
// the pod author wrote them), sees keys given twice, which decoding into a map
// hides, and costs no allocation per value.

// jsonKind names the JSON type of a valid JSON value for error messages.
func jsonKind(raw []byte) string {
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}

// objectMembers calls fn with each member of the valid JSON object raw, in
// order. The key is decoded but not copied into a string, which the common
// comparisons with known keys do not need.
func objectMembers(raw []byte, fn func(key, value []byte)) {
	i := skipSpace(raw, 1)
	for i < len(raw) && raw[i] == '"' {
		keyEnd := stringEnd(raw, i)
		key := decodeKey(raw[i:keyEnd])
		i = skipSpace(raw, skipSpace(raw, keyEnd)+1) // past the ':'
		end := valueEnd(raw, i)
		fn(key, raw[i:end:end])
		i = nextItem(raw, end)
	}
}

// arrayElements calls fn with each element of the valid JSON array raw, in order.
func arrayElements(raw []byte, fn func(index int, value []byte)) {
	i := skipSpace(raw, 1)
	for n := 0; i < len(raw) && raw[i] != ']'; n++ {
		end := valueEnd(raw, i)
		fn(n, raw[i:end:end])
		i = nextItem(raw, end)
	}
}

// nextItem returns the start of the member or element after the one ending at i.
func nextItem(raw []byte, i int) int {
	i = skipSpace(raw, i)
	if i < len(raw) && raw[i] == ',' {
		i = skipSpace(raw, i+1)
	}
	return i
}

func skipSpace(raw []byte, i int) int {
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\n' || raw[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at raw[i].
func stringEnd(raw []byte, i int) int {
	for j := i + 1; j < len(raw); j++ {
		switch raw[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(raw)
}

// valueEnd returns the index just past the JSON value starting at raw[i].
func valueEnd(raw []byte, i int) int {
	depth := 0
	for ; i < len(raw); i++ {
		switch raw[i] {
		case '"':
			i = stringEnd(raw, i) - 1
			if depth == 0 {
				return i + 1
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
			if depth == 0 {
				return i + 1
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// decodeString decodes a valid JSON string.
func decodeString(raw []byte) string {
	if body, plain := plainString(raw); plain {
		return string(body)
	}
	var s string
	// raw is a valid JSON string, so this cannot fail; invalid UTF-8 becomes U+FFFD.
	_ = json.Unmarshal(raw, &s)
	return s
}

// decodeKey decodes a valid JSON string, in place when it has no escapes.
func decodeKey(raw []byte) []byte {
	if body, plain := plainString(raw); plain {
		return body
	}
	return []byte(decodeString(raw))
}

// plainString returns the body of a valid JSON string that decodes to itself:
// no escapes and valid UTF-8.
func plainString(raw []byte) ([]byte, bool) {
	body := raw[1 : len(raw)-1]
	return body, bytes.IndexByte(body, '\\') < 0 && utf8.Valid(body)
}

package selection

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
)

// Parse parses the value of the networks annotation (4.1) of a pod in
// podNamespace. An empty or all-blank value selects nothing. On any problem it
// returns no selections and every problem found, each a *FieldError, joined with
// errors.Join: the spec makes an invalid annotation invalid as a whole. An
// invalid podNamespace is the caller's mistake and a plain error.
func Parse(value, podNamespace string) ([]Selection, error) {
	trimmed := strings.TrimSpace(value)
	if trimmed == "" {
		return nil, nil
	}
	if err := checkDNSLabel(podNamespace); err != nil {
		return nil, fmt.Errorf("networks annotation: pod namespace %q: %w", podNamespace, err)
	}
	list := listParser{podNamespace: podNamespace, defaultRouteAt: -1}
	switch trimmed[0] {
	case '[':
		if err := list.parseJSON(value, trimmed); err != nil {
			return nil, err
		}
	case '{':
		return nil, &FieldError{Index: -1, Reason: "a JSON list is required (4.1.2), found a JSON object; wrap it in [ ]"}
	default:
		list.parseCommas(trimmed)
	}
	if len(list.errs) > 0 {
		return nil, errors.Join(list.errs...)
	}
	return list.selections, nil
}

// ParseList parses a JSON list of selections in the annotation's JSON format
// (4.1.2) held by something other than the annotation, such as a
// ResourceClaim's hwnet configuration: the same keys and checks, with source
// naming the holder in every error instead of "networks annotation".
func ParseList(value, namespace, source string) ([]Selection, error) {
	trimmed := strings.TrimSpace(value)
	if !strings.HasPrefix(trimmed, "[") {
		return nil, &FieldError{Source: source, Index: -1, Reason: "a JSON list is required (4.1.2)"}
	}
	sels, err := Parse(value, namespace)
	if err == nil {
		return sels, nil
	}
	for _, e := range unjoin(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			fe.Source = source
		}
	}
	return nil, err
}

// unjoin lists the errors errors.Join joined, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// listParser holds what one element's checks need to know about the others.
type listParser struct {
	podNamespace string
	selections   []Selection
	errs         []error
	// interfaces maps each requested interface name to the element asking for it.
	interfaces map[string]int
	// defaultRouteAt is the element carrying "default-route", or -1.
	defaultRouteAt int
	// seenKeys is the per-element key list, kept here to reuse its storage.
	seenKeys []string
}

// parseJSON parses the JSON list format (4.1.2); value is the annotation as
// written, trimmed its trimmed form.
func (l *listParser) parseJSON(value, trimmed string) error {
	raw := []byte(trimmed)
	if !json.Valid(raw) {
		return syntaxError(value, raw)
	}
	arrayElements(raw, func(index int, item []byte) {
		e := l.newElement(index)
		e.parseObject(item)
		l.add(e)
	})
	return nil
}

// parseCommas parses the comma-delimited format (4.1.1).
func (l *listParser) parseCommas(trimmed string) {
	l.selections = make([]Selection, 0, strings.Count(trimmed, ",")+1)
	index := 0
	for item := range strings.SplitSeq(trimmed, ",") {
		e := l.newElement(index)
		e.parseRef(strings.TrimSpace(item))
		l.add(e)
		index++
	}
}

func (l *listParser) newElement(index int) *element {
	l.seenKeys = l.seenKeys[:0]
	return &element{list: l, index: index}
}

// add records a parsed element: its selection, or its problems labelled with
// its position and name.
func (l *listParser) add(e *element) {
	if e.sel.Namespace == "" {
		e.sel.Namespace = l.podNamespace
	}
	for _, fe := range e.errs {
		fe.Index, fe.Network = e.index, e.sel.Name
		l.errs = append(l.errs, fe)
	}
	if len(e.errs) == 0 && len(l.errs) == 0 {
		l.selections = append(l.selections, e.sel)
	}
}

// syntaxError explains why the JSON list does not parse, with the line and
// column in the annotation as written; raw is its trimmed form.
func syntaxError(value string, raw []byte) error {
	var target any
	err := json.Unmarshal(raw, &target)
	var syntax *json.SyntaxError
	if !errors.As(err, &syntax) {
		return &FieldError{Index: -1, Reason: fmt.Sprintf("not valid JSON: %v", err)}
	}
	leading := len(value) - len(strings.TrimLeftFunc(value, unicode.IsSpace))
	offset := leading + int(syntax.Offset) - 1
	line := strings.Count(value[:max(offset, 0)], "\n") + 1
	column := offset - strings.LastIndexByte(value[:max(offset, 0)], '\n')
	reason := fmt.Sprintf("not valid JSON at line %d column %d: %v", line, column, err)
	if offset >= 0 && offset < len(value) {
		reason += syntaxHint(value[offset])
	}
	return &FieldError{Index: -1, Reason: reason}
}

// syntaxHint names the usual reason for a bad character in hand-written JSON.
func syntaxHint(bad byte) string {
	switch bad {
	case '/':
		return " (JSON has no comments)"
	case '\'':
		return " (JSON strings take double quotes)"
	}
	return ""
}

package attachment

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// fileFormat is the record's envelope: a version field, absent from the
// first records.
func fileFormat() fileformat.Format {
	return fileformat.Format{Name: "attachment record", Unversioned: 1, MaxSize: MaxSize}
}

// Encode is the record object's line of the file, in the current version.
func Encode(rec *Record) ([]byte, error) {
	versioned := *rec
	versioned.Version = Version
	data, err := json.Marshal(&versioned)
	if err != nil {
		return nil, fmt.Errorf("attachment record %s: %w", rec.ContainerID, err)
	}
	return data, nil
}

// EncodeResults is the results line appended to the file once the ADD
// finished, "null" for an attachment without one, newlines included.
func EncodeResults(rec *Record) ([]byte, error) {
	results := make([]json.RawMessage, len(rec.Attachments))
	for i, a := range rec.Attachments {
		results[i] = a.Result
		if len(a.Result) == 0 {
			results[i] = json.RawMessage("null")
		}
	}
	data, err := json.Marshal(results)
	if err != nil {
		return nil, fmt.Errorf("attachment record %s results: %w", rec.ContainerID, err)
	}
	return append(append([]byte{'\n'}, data...), '\n'), nil
}

// Load reads and decodes the record file at path; its errors name the
// file. A missing file is an error wrapping fs.ErrNotExist.
func Load(path string) (*Record, error) {
	return fileformat.Load(fileFormat(), path, Decode)
}

// Decode reads a record file of any version. Only a file that is not a
// JSON object with a version (torn, or not a record) or that is over
// MaxSize is an error, wrapping fileformat.ErrMalformed or ErrTooLarge:
// anything else is read as far as it can be, what was left out said in
// Skipped.
func Decode(data []byte) (*Record, error) {
	object, rest, h, err := fileFormat().Open(data)
	if err != nil {
		return nil, err
	}
	rec := &Record{}
	var typeErr *json.UnmarshalTypeError
	if err := json.Unmarshal(object, rec); errors.As(err, &typeErr) {
		rec.Skipped = append(rec.Skipped, fmt.Sprintf("a field of the wrong type: %v", err))
	} else if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", fileFormat().Name, fileformat.ErrMalformed, err)
	}
	rec.Version = h.Version
	if h.Version > Version {
		rec.Skipped = append(rec.Skipped, fmt.Sprintf("format version %d is newer than the %d this hwnet reads: read only the fields it knows", h.Version, Version))
	}
	addResults(rec, rest)
	dropUntearable(rec)
	return rec, nil
}

// addResults sets the attachments' results from the results line. A line
// cut short by a crash is as good as none: DEL then runs without
// prevResult, which delegates must accept.
func addResults(rec *Record, line []byte) {
	var results []json.RawMessage
	if json.NewDecoder(bytes.NewReader(line)).Decode(&results) != nil || len(results) != len(rec.Attachments) {
		return
	}
	for i, r := range results {
		if string(r) != "null" { // an attachment whose ADD did not finish
			rec.Attachments[i].Result = r
		}
	}
}

// dropUntearable leaves out attachments that lack what their DEL needs,
// an interface name and a configuration list, so that the others are
// still torn down. A record without attachments has them nil.
func dropUntearable(rec *Record) {
	var kept []Attachment
	for i, a := range rec.Attachments {
		if a.IfName == "" || len(a.ConfList) == 0 || a.ConfList[0] != '{' {
			rec.Skipped = append(rec.Skipped, fmt.Sprintf("attachments[%d] (network %q): no interface name or configuration list to run its DEL with", i, a.Network))
			continue
		}
		kept = append(kept, a)
	}
	rec.Attachments = kept
}

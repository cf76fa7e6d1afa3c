package fence_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/api/fence"
	"github.com/hwnet-io/hwnet/internal/fileformat"
	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"
)

func sample() *fence.Record {
	return &fence.Record{Key: "vf-layout/0000:3b:00.0", PF: "0000:3b:00.0", Reason: "its PF's VF layout pf0 is being applied",
		Since: time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC),
		Layout: &fence.LayoutChange{Name: "pf0", Before: []fence.VF{{Driver: "iavf"}, {Driver: "vfio-pci", Override: "vfio-pci"}, {}},
			Target: fence.Layout{NumVFs: 4, Drivers: map[int]string{0: "vfio-pci"}}}}
}

// TestRoundTrip: what Encode writes, Decode reads back whole.
func TestRoundTrip(t *testing.T) {
	data, err := fence.Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	got, err := fence.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, sample()) {
		t.Errorf("decoded %+v, want %+v", got, sample())
	}
}

// TestESwitchModes: a change of the PF's eSwitch mode keeps the mode
// before and the target through the file, in version 1 still; a version
// 1 file without them (an older hwnet's, or a change that leaves the mode
// be) reads as one that leaves the mode be.
func TestESwitchModes(t *testing.T) {
	r := sample()
	r.Layout.ESwitchModeBefore, r.Layout.Target.ESwitchMode = "legacy", "switchdev"
	data, err := fence.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"version": 1`)) || !bytes.Contains(data, []byte(`"eswitchModeBefore": "legacy"`)) {
		t.Errorf("encoded\n%s\nwant version 1 with eswitchModeBefore", data)
	}
	if got, err := fence.Decode(data); err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("decoded %+v, %v; want %+v", got, err, r)
	}
	old := []byte(`{"version": 1, "checksum": 0, "fence": {"key": "k", "pf": "p", "layout": {"before": [{"driver": "iavf"}], "target": {"numVFs": 2}}}}`)
	payload, err := fileformat.Payload(old, "fence")
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := fileformat.Checksum(payload)
	old = bytes.Replace(old, []byte(`"checksum": 0`), []byte(`"checksum": `+strconv.FormatUint(uint64(sum), 10)), 1)
	got, err := fence.Decode(old)
	if err != nil || got.Layout.ESwitchModeBefore != "" || got.Layout.Target.ESwitchMode != "" || got.Layout.Target.NumVFs != 2 {
		t.Errorf("an older version 1 file: %+v, %v; want no modes", got, err)
	}
}

// TestSFs: a change of the PF's SF count keeps the target count and the
// sfnums the PF had through the file, in version 1 still; a file without
// them (an older hwnet's, or a change that leaves the SFs be) reads as one
// that leaves them be, and an older reader ignores them (json skips
// unknown fields).
func TestSFs(t *testing.T) {
	r := sample()
	r.Layout.SFsBefore, r.Layout.Target.NumSFs = []int{88, 89}, new(3)
	data, err := fence.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(`"version": 1`)) || !bytes.Contains(data, []byte(`"sfsBefore": [`)) ||
		!bytes.Contains(data, []byte(`"numSFs": 3`)) {
		t.Errorf("encoded\n%s\nwant version 1 with sfsBefore and target.numSFs", data)
	}
	if got, err := fence.Decode(data); err != nil || !reflect.DeepEqual(got, r) {
		t.Errorf("decoded %+v, %v; want %+v", got, err, r)
	}
	if got, err := fence.Decode(mustEncode(t, sample())); err != nil || got.Layout.Target.NumSFs != nil || got.Layout.SFsBefore != nil {
		t.Errorf("a change without SFs: %+v, %v; want none", got.Layout, err)
	}
}

func mustEncode(t *testing.T, r *fence.Record) []byte {
	t.Helper()
	data, err := fence.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestNewerVersionRead: a fence a newer hwnet wrote is read as far as its
// fields are known: a rolled-back agent still sees the PF fenced.
func TestNewerVersionRead(t *testing.T) {
	data := []byte(`{"version": 2, "checksum": "sha256:whatever", "fence": {"key": "vf-layout/0000:3b:00.0", "pf": "0000:3b:00.0", "reason": "r", "eswitch": "switchdev"}}`)
	got, err := fence.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if got.PF != "0000:3b:00.0" || got.Key != "vf-layout/0000:3b:00.0" {
		t.Errorf("decoded %+v", got)
	}
}

// TestRefused: a torn, edited, oversize or keyless file is refused with
// an error naming the format and what is wrong.
func TestRefused(t *testing.T) {
	good, err := fence.Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	edited := bytes.Replace(good, []byte(`"numVFs": 4`), []byte(`"numVFs": 8`), 1)
	formattest.Refused(t, "device fence", fence.Decode, []formattest.Refusal{
		{Name: "torn", Data: good[:len(good)/2], Is: fileformat.ErrMalformed, Want: "malformed"},
		{Name: "edited", Data: edited, Is: fileformat.ErrChecksum, Want: "torn or edited"},
		{Name: "oversize", Data: formattest.Oversize(fence.MaxSize), Is: fileformat.ErrTooLarge, Want: "size limit"},
		{Name: "no key", Data: []byte(`{"version": 2, "fence": {"pf": "0000:3b:00.0"}}`), Is: fileformat.ErrMalformed, Want: "key: empty"},
		{Name: "no pf", Data: []byte(`{"version": 2, "fence": {"key": "k"}}`), Is: fileformat.ErrMalformed, Want: "pf: empty"},
		{Name: "negative count", Data: []byte(`{"version": 2, "fence": {"key": "k", "pf": "p", "layout": {"target": {"numVFs": -1}}}}`),
			Is: fileformat.ErrMalformed, Want: "layout.target.numVFs: -1 is negative"},
		{Name: "odd mode before", Data: []byte(`{"version": 2, "fence": {"key": "k", "pf": "p", "layout": {"eswitchModeBefore": "offload"}}}`),
			Is: fileformat.ErrMalformed, Want: `layout.eswitchModeBefore: "offload"`},
		{Name: "odd target mode", Data: []byte(`{"version": 2, "fence": {"key": "k", "pf": "p", "layout": {"target": {"eswitchMode": "Legacy"}}}}`),
			Is: fileformat.ErrMalformed, Want: `layout.target.eswitchMode: "Legacy"`},
		{Name: "negative SF count", Data: []byte(`{"version": 2, "fence": {"key": "k", "pf": "p", "layout": {"target": {"numSFs": -2}}}}`),
			Is: fileformat.ErrMalformed, Want: "layout.target.numSFs: -2 is negative"},
		{Name: "sfnum twice", Data: []byte(`{"version": 2, "fence": {"key": "k", "pf": "p", "layout": {"sfsBefore": [88, 88]}}}`),
			Is: fileformat.ErrMalformed, Want: "layout.sfsBefore[1]: 88"},
	})
	if _, err := fence.Encode(&fence.Record{PF: "p"}); err == nil || !strings.Contains(err.Error(), "key: empty") {
		t.Errorf("Encode of a keyless fence: %v, want it refused naming the key", err)
	}
}

// TestFileName: a key makes one safe file name.
func TestFileName(t *testing.T) {
	if got := fence.FileName("vf-layout/0000:3b:00.0"); got != "vf-layout_0000_3b_00.0.json" {
		t.Errorf("FileName = %q", got)
	}
}

func FuzzDecode(f *testing.F) {
	good, err := fence.Encode(sample())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"version": 2, "fence": {"key": "k", "pf": "p"}}`))
	f.Add([]byte(`{"version": 1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := fence.Decode(data)
		if err != nil {
			return
		}
		if r.Key == "" || r.PF == "" {
			t.Fatalf("decoded a fence without key or PF: %+v", r)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	})
}

package agentrestart_test

import (
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/hwnet-io/hwnet/api/agentrestart"
	"github.com/hwnet-io/hwnet/internal/fileformat"
	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"
)

func sample() *agentrestart.Notice {
	stopped := time.Date(2026, 12, 2, 17, 0, 0, 0, time.UTC)
	return &agentrestart.Notice{Stopped: stopped, Until: stopped.Add(30 * time.Second)}
}

// TestLeaveLoadWithdraw: a notice left is loaded back whole and expects
// the agent until its Until, not after; withdrawn, it is gone, and so is
// one never left, without error either way.
func TestLeaveLoadWithdraw(t *testing.T) {
	path := agentrestart.Path(filepath.Join(t.TempDir(), "cni.sock"))
	if n, err := agentrestart.Load(path); n != nil || err != nil {
		t.Fatalf("no notice: %+v %v, want none", n, err)
	}
	if err := agentrestart.Leave(path, sample()); err != nil {
		t.Fatal(err)
	}
	n, err := agentrestart.Load(path)
	if err != nil || !reflect.DeepEqual(n, sample()) {
		t.Fatalf("loaded %+v (%v), want %+v", n, err, sample())
	}
	if !n.Expects(n.Until.Add(-time.Nanosecond)) || n.Expects(n.Until) {
		t.Errorf("Expects: want true just before %s and false from it", n.Until)
	}
	for range 2 {
		if err := agentrestart.Withdraw(path); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := agentrestart.Load(path); n != nil || err != nil {
		t.Errorf("after Withdraw: %+v %v, want none", n, err)
	}
}

// TestDecodeRefuses: torn, oversize and incomplete notices are refused
// naming the field; a newer version is read as far as it is known; a
// notice without its times is never written.
func TestDecodeRefuses(t *testing.T) {
	good, err := agentrestart.Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	formattest.Refused(t, "agent restart notice", agentrestart.Decode, []formattest.Refusal{
		{Name: "torn", Data: good[:len(good)/2], Is: fileformat.ErrMalformed, Want: "malformed"},
		{Name: "oversize", Data: formattest.Oversize(agentrestart.MaxSize), Is: fileformat.ErrTooLarge, Want: "size limit"},
		{Name: "no until", Data: []byte(`{"version": 1, "stopped": "2026-12-02T17:00:00Z"}`), Is: fileformat.ErrMalformed, Want: "until: empty"},
		{Name: "no stopped", Data: []byte(`{"version": 1, "until": "2026-12-02T17:00:00Z"}`), Is: fileformat.ErrMalformed, Want: "stopped: empty"},
		{Name: "until first", Data: []byte(`{"version": 1, "stopped": "2026-12-02T17:00:00Z", "until": "2026-12-02T16:00:00Z"}`),
			Is: fileformat.ErrMalformed, Want: "until 2026-12-02T16:00:00Z: before stopped"},
		{Name: "bad time", Data: []byte(`{"version": 1, "stopped": "soon", "until": "2026-12-02T17:00:00Z"}`), Is: fileformat.ErrMalformed, Want: "soon"},
		{Name: "no version", Data: []byte(`{"stopped": "2026-12-02T17:00:00Z"}`), Is: fileformat.ErrMalformed, Want: "no version"},
	})
	newer := []byte(`{"version": 2, "stopped": "2026-12-02T17:00:00Z", "until": "2026-12-02T17:00:30Z", "reason": "upgrade"}`)
	if n, err := agentrestart.Decode(newer); err != nil || !reflect.DeepEqual(n, sample()) {
		t.Errorf("newer: %+v %v, want %+v", n, err, sample())
	}
	if _, err := agentrestart.Encode(&agentrestart.Notice{}); err == nil {
		t.Error("a notice without times was encoded")
	}
}

func FuzzDecode(f *testing.F) {
	good, err := agentrestart.Encode(sample())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"version": 2, "stopped": "2026-12-02T17:00:00Z", "until": "2026-12-02T17:00:30Z"}`))
	f.Add([]byte(`{"version": 1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		n, err := agentrestart.Decode(data)
		if err != nil {
			return
		}
		if n.Stopped.IsZero() || n.Until.Before(n.Stopped) {
			t.Fatalf("decoded a notice readers cannot rely on: %+v", n)
		}
	})
}

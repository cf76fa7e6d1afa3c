package checkpoint_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"

	"github.com/hwnet-io/hwnet/api/dra/checkpoint"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// sample is a checkpoint of one claim with one device, a network and VF
// settings.
func sample() *checkpoint.Checkpoint {
	cp := checkpoint.New()
	vlan := 100
	cp.Claims["uid-a"] = &checkpoint.Claim{Namespace: "ns", Name: "a", CDISpec: "/var/run/cdi/hwnet-uid-a.json",
		Devices: []checkpoint.Device{{Request: "nic", Pool: "node1", Device: "vf-0000-3b-02-0", Resource: "hwnet.io/vf",
			PCIAddress: "0000:3b:02.0", CDIDevice: "hwnet.io/net=uid-a-vf-0000-3b-02-0", Network: json.RawMessage(`{"name":"n"}`),
			VF: &vfsettings.Record{PF: "enp59s0f0", Index: 8, PCIAddress: "0000:3b:02.0", Settings: vfsettings.Settings{VLAN: &vlan},
				Original: vfsettings.Original{MAC: "52:54:00:00:00:08", MTU: 1500}, Applied: true}}},
		Pods: []string{"pod-1"}}
	return cp
}

// v1File is a checkpoint as hwnet's first DRA driver wrote it.
const v1File = `{
  "version": 1,
  "claims": {
    "uid-a": {"namespace": "ns", "name": "a", "cdiSpec": "/var/run/cdi/hwnet-uid-a.json",
      "devices": [{"request": "nic", "pool": "node1", "device": "vf-0000-3b-02-0", "resource": "hwnet.io/vf",
        "pciAddress": "0000:3b:02.0", "cdiDevice": "hwnet.io/net=uid-a-vf-0000-3b-02-0"}]}
  }
}`

// v9File is a checkpoint of a future version: a new top-level field, a
// claim field whose type changed, and an unknown device field.
const v9File = `{
  "version": 9,
  "checksum": "sha256:whatever",
  "leases": {"x": 1},
  "claims": {
    "uid-a": {"namespace": "ns", "name": "a", "cdiSpec": "/var/run/cdi/hwnet-uid-a.json", "pods": {"pod-1": true},
      "devices": [{"device": "vf-0000-3b-02-0", "resource": "hwnet.io/vf", "pciAddress": "0000:3b:02.0", "numa": 1}]},
    "uid-b": null
  }
}`

func encoded(t testing.TB, cp *checkpoint.Checkpoint) []byte {
	data, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecode(t *testing.T) {
	current := encoded(t, sample())
	tests := []struct {
		name string
		file []byte
		// check is what the decoded checkpoint must hold.
		check func(t *testing.T, cp *checkpoint.Checkpoint)
	}{
		{"current round trip", current, func(t *testing.T, cp *checkpoint.Checkpoint) {
			want := sample()
			want.Checksum = cp.Checksum
			if got, want := jsonOf(t, cp), jsonOf(t, want); got != want {
				t.Errorf("decoded %s, want %s", got, want)
			}
		}},
		{"re-indented", reindented(t, current), func(t *testing.T, cp *checkpoint.Checkpoint) {
			if len(cp.Claims) != 1 {
				t.Errorf("claims: %v", cp.Claims)
			}
		}},
		{"version 2, checksummed, without VF settings", bytes.Replace(encoded(t, withoutVF(sample())), []byte(`"version":3`), []byte(`"version":2`), 1),
			func(t *testing.T, cp *checkpoint.Checkpoint) {
				c := cp.Claims["uid-a"]
				if cp.Version != 2 || c == nil || len(c.Devices) != 1 || c.Devices[0].VF != nil || c.Devices[0].PCIAddress != "0000:3b:02.0" {
					t.Errorf("decoded %+v", cp)
				}
			}},
		{"version 1", []byte(v1File), func(t *testing.T, cp *checkpoint.Checkpoint) {
			c := cp.Claims["uid-a"]
			if cp.Version != 1 || c == nil || c.CDISpec == "" || len(c.Devices) != 1 || c.Devices[0].PCIAddress != "0000:3b:02.0" {
				t.Errorf("decoded %+v", cp)
			}
		}},
		{"newer version keeps what unprepare needs", []byte(v9File), func(t *testing.T, cp *checkpoint.Checkpoint) {
			c := cp.Claims["uid-a"]
			if cp.Version != 9 || len(cp.Claims) != 1 || c == nil || c.CDISpec != "/var/run/cdi/hwnet-uid-a.json" ||
				len(c.Devices) != 1 || c.Devices[0].Resource != "hwnet.io/vf" || c.Devices[0].PCIAddress != "0000:3b:02.0" {
				t.Errorf("decoded %+v", cp)
			}
		}},
		{"empty claims", []byte(`{"version":1}`), func(t *testing.T, cp *checkpoint.Checkpoint) {
			if cp.Claims == nil || len(cp.Claims) != 0 {
				t.Errorf("claims: %v", cp.Claims)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp, err := checkpoint.Decode(tt.file)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cp)
		})
	}
}

func withoutVF(cp *checkpoint.Checkpoint) *checkpoint.Checkpoint {
	for _, c := range cp.Claims {
		for i := range c.Devices {
			c.Devices[i].VF = nil
		}
	}
	return cp
}

func reindented(t *testing.T, data []byte) []byte {
	var out bytes.Buffer
	if err := json.Indent(&out, data, "", "\t"); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestDecode_Refused(t *testing.T) {
	current := encoded(t, sample())
	formattest.Refused(t, "DRA checkpoint", checkpoint.Decode, []formattest.Refusal{
		{Name: "torn", Data: current[:len(current)/2], Is: fileformat.ErrMalformed, Want: "unexpected EOF"},
		{Name: "empty", Data: nil, Is: fileformat.ErrMalformed, Want: "EOF"},
		{Name: "not an object", Data: []byte(`[1]`), Is: fileformat.ErrMalformed, Want: "not a JSON object"},
		{Name: "trailing data", Data: append(append([]byte{}, current...), `{}`...), Is: fileformat.ErrMalformed, Want: "data after the object"},
		{Name: "no version", Data: []byte(`{"claims":{}}`), Is: fileformat.ErrMalformed, Want: "no version"},
		{Name: "version not a number", Data: []byte(`{"version":"2"}`), Is: fileformat.ErrMalformed, Want: "version"},
		{Name: "checksum mismatch", Data: bytes.Replace(current, []byte(`"ns"`), []byte(`"xx"`), 1), Is: fileformat.ErrChecksum, Want: "claims sum to"},
		{Name: "checksum not a number", Data: []byte(`{"version":2,"checksum":"1","claims":{}}`), Is: fileformat.ErrChecksum, Want: "checksum \"1\""},
		{Name: "no checksum", Data: []byte(`{"version":2,"claims":{}}`), Is: fileformat.ErrChecksum, Want: "no checksum"},
		{Name: "version 1 claims of the wrong type", Data: []byte(`{"version":1,"claims":[]}`), Is: fileformat.ErrMalformed, Want: "version 1"},
		{Name: "oversize", Data: formattest.Oversize(checkpoint.MaxSize), Is: fileformat.ErrTooLarge, Want: "more than 16777216 bytes"},
	})
}

func TestLoad_NamesTheFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	if _, err := checkpoint.Load(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"version":2,"checksum":1,"claims":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Load(path); !errors.Is(err, fileformat.ErrChecksum) || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want a checksum error naming %s", err, path)
	}
	if err := os.WriteFile(path, formattest.Oversize(checkpoint.MaxSize), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := checkpoint.Load(path); !errors.Is(err, fileformat.ErrTooLarge) || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want a size error naming %s", err, path)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encoded(f, sample()))
	f.Add(encoded(f, checkpoint.New()))
	f.Add([]byte(v1File))
	f.Add([]byte(v9File))
	f.Add([]byte(`{"version":2,"checksum":0,"claims":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		cp, err := checkpoint.Decode(data)
		if err != nil {
			return
		}
		for uid, c := range cp.Claims {
			if c == nil {
				t.Fatalf("claim %s is nil", uid)
			}
		}
		again, err := checkpoint.Decode(encoded(t, cp))
		if err != nil {
			t.Fatalf("re-encoded checkpoint does not decode: %v", err)
		}
		cp.Version, cp.Checksum, again.Checksum = checkpoint.Version, 0, 0
		if jsonOf(t, cp) != jsonOf(t, again) {
			t.Fatalf("round trip changed %s into %s", jsonOf(t, cp), jsonOf(t, again))
		}
	})
}

func jsonOf(t *testing.T, cp *checkpoint.Checkpoint) string {
	data, err := json.Marshal(cp)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestOwned: an hwnet checkpoint is told from another DRA driver's
// checkpoint.json by its marker (even torn), or, written before there was
// one, by its devices' CDI names of the driver's kind.
func TestOwned(t *testing.T) {
	current, err := checkpoint.Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name   string
		data   []byte
		driver string
		want   bool
	}{
		{"current, with its marker", current, "hwnet.io", true},
		{"current, torn", current[:len(current)/3], "hwnet.io", true},
		{"version 1, its driver's CDI names", []byte(v1File), "hwnet.io", true},
		{"version 1 in another driver's directory", []byte(v1File), "gpu.example.com", false},
		{"another driver's format", []byte(`{"checksum": 1, "v1": {"preparedClaims": {}}}`), "gpu.example.com", false},
		{"not JSON", []byte("garbage"), "gpu.example.com", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := checkpoint.Owned(tt.data, tt.driver); got != tt.want {
				t.Errorf("Owned = %t, want %t", got, tt.want)
			}
		})
	}
}

// TestEncode: the file is exactly the claims as json.Marshal writes them
// inside the envelope, and so is what one Encoder writes for
// checkpoints one after another, larger and smaller, into the buffers
// it reuses.
func TestEncode(t *testing.T) {
	many := checkpoint.New()
	for i := range 40 {
		c := *sample().Claims["uid-a"]
		c.Name = strings.Repeat("n", i)
		many.Claims[types.UID(strings.Repeat("u", i+1))] = &c
	}
	var e checkpoint.Encoder
	for i, cp := range []*checkpoint.Checkpoint{checkpoint.New(), sample(), many, sample(), checkpoint.New(), many} {
		claims, err := json.Marshal(cp.Claims)
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`{"format":%q,"version":%d,"checksum":%d,"claims":%s}`+"\n",
			checkpoint.Marker, checkpoint.Version, fileformat.ChecksumMarshaled(claims), claims)
		if got := encoded(t, cp); string(got) != want {
			t.Fatalf("checkpoint %d: Encode:\n got %s\nwant %s", i, got, want)
		}
		got, err := e.Encode(cp, false)
		if err != nil || string(got) != want {
			t.Fatalf("checkpoint %d: Encoder.Encode (%v):\n got %s\nwant %s", i, err, got, want)
		}
		back, err := checkpoint.Decode(got)
		if err != nil || len(back.Claims) != len(cp.Claims) {
			t.Fatalf("checkpoint %d: Decode of what Encode wrote: %d claims, %v; want %d", i, len(back.Claims), err, len(cp.Claims))
		}
	}
}

// TestEncoderKeeps: an Encoder writes, through 3000 random changes (a
// claim added or replaced by a changed copy, removed, nil, the same claim
// under a second UID), each saved kept or not, exactly the file Encode
// writes for the checkpoint: a kept claim's encoding stands
// only for that claim under that UID.
func TestEncoderKeeps(t *testing.T) {
	rng := rand.New(rand.NewPCG(43, 24))
	var e checkpoint.Encoder
	kept := checkpoint.New()
	for step := range 3000 {
		next := &checkpoint.Checkpoint{Version: kept.Version, Claims: maps.Clone(kept.Claims)}
		uid := types.UID(fmt.Sprintf("uid-%d", rng.IntN(12)))
		switch rng.IntN(6) {
		case 0:
			delete(next.Claims, uid)
		case 1:
			next.Claims[uid] = nil
		case 2:
			for other, c := range next.Claims {
				if other != uid {
					next.Claims[uid] = c
					break
				}
			}
		default:
			c := *sample().Claims["uid-a"]
			c.Name, c.Pods = fmt.Sprintf("claim-%d", step), []string{fmt.Sprintf("pod-%d", rng.IntN(3))}
			next.Claims[uid] = &c
		}
		keep := rng.IntN(4) > 0
		got, err := e.Encode(next, keep)
		if err != nil {
			t.Fatal(err)
		}
		want, err := checkpoint.Encode(next)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("step %d (keep %t): Encoder wrote\n%s\nEncode writes\n%s", step, keep, got, want)
		}
		if keep {
			kept = next
		}
	}
}

// BenchmarkEncode encodes a node's checkpoint of 100 claims of 4
// devices with one claim replaced, as a kubelet call changes it, into
// an Encoder's buffers: afresh (it kept nothing), and with the other 99
// kept.
func BenchmarkEncode(b *testing.B) {
	held := checkpoint.New()
	for i := range 100 {
		c := *sample().Claims["uid-a"]
		c.Devices = slices.Repeat(c.Devices, 4)
		held.Claims[types.UID(fmt.Sprintf("uid-%03d", i))] = &c
	}
	next := func() *checkpoint.Checkpoint {
		cp := &checkpoint.Checkpoint{Version: held.Version, Claims: maps.Clone(held.Claims)}
		c := *held.Claims["uid-050"]
		cp.Claims["uid-050"] = &c
		return cp
	}
	for _, keep := range []bool{false, true} {
		b.Run(map[bool]string{false: "afresh", true: "kept"}[keep], func(b *testing.B) {
			var e checkpoint.Encoder
			if _, err := e.Encode(held, keep); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := e.Encode(next(), false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

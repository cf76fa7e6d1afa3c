package attachment_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"

	"github.com/hwnet-io/hwnet/api/attachment"
	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

const confList = `{"cniVersion":"1.0.0","name":"a","plugins":[{"type":"sriov"}]}`

// sample is a record of two attachments whose ADD finished.
func sample() *attachment.Record {
	return &attachment.Record{Version: attachment.Version, ContainerID: "c1", Netns: "/run/netns/x", PodNamespace: "ns", PodName: "p", PodUID: "u",
		Attachments: []attachment.Attachment{
			{Network: "podnet", IfName: "eth0", Default: true, ConfList: json.RawMessage(confList), Result: json.RawMessage(`{"cniVersion":"1.0.0"}`)},
			{Network: "ns/a", IfName: "net1", ConfList: json.RawMessage(confList), Args: [][2]string{{"K8S_POD_NAME", "p"}},
				CapabilityArgs: map[string]json.RawMessage{"mac": json.RawMessage(`"02:00:00:00:00:01"`)},
				DeviceID:       "0000:3b:02.0", Resource: "hwnet.io/vf", DeviceInfoFile: "/var/run/k8s.cni.cncf.io/devinfo/x.json",
				VF: &vfsettings.Record{PF: "enp59s0f0", Index: 8, PCIAddress: "0000:3b:02.0", Settings: vfsettings.Settings{VLAN: &vlan100},
					Original: vfsettings.Original{MAC: "52:54:00:00:00:08", MTU: 1500}},
				Result: json.RawMessage(`{"cniVersion":"1.0.0","interfaces":[{"name":"net1"}]}`)}}}
}

var vlan100 = 100

// file is a record file as the store writes it: the record, then the
// results line.
func file(t testing.TB, rec *attachment.Record) []byte {
	withoutResults := *rec
	withoutResults.Attachments = nil
	for _, a := range rec.Attachments {
		a.Result = nil
		withoutResults.Attachments = append(withoutResults.Attachments, a)
	}
	data, err := attachment.Encode(&withoutResults)
	if err != nil {
		t.Fatal(err)
	}
	results, err := attachment.EncodeResults(rec)
	if err != nil {
		t.Fatal(err)
	}
	return append(data, results...)
}

// unversioned is a record as hwnet wrote them before they had a version.
const unversioned = `{"containerID":"c1","netns":"/run/netns/x","attachments":[{"network":"ns/a","ifName":"net1","confList":` + confList + `}]}`

// newer is a record of a future version: a new field, a changed type, and
// a new kind of attachment without a configuration list.
const newer = `{"version":7,"containerID":"c1","netns":"/run/netns/x","podUID":{"v":"u"},"leases":[1],
"attachments":[{"network":"ns/a","ifName":"net1","confList":` + confList + `,"vrf":"red"},{"network":"ns/b","ifName":"net2","program":"x"}]}
[{"cniVersion":"1.0.0"},null]
`

func withoutVF(rec *attachment.Record) *attachment.Record {
	for i := range rec.Attachments {
		rec.Attachments[i].VF = nil
	}
	return rec
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		data []byte
		want func(t *testing.T, rec *attachment.Record)
	}{
		{"current round trip", file(t, sample()), func(t *testing.T, rec *attachment.Record) {
			if got, want := jsonOf(t, rec), jsonOf(t, sample()); got != want || len(rec.Skipped) != 0 {
				t.Errorf("decoded %s (skipped %q), want %s", got, rec.Skipped, want)
			}
		}},
		{"no results line yet", file(t, sample())[:bytes.IndexByte(file(t, sample()), '\n')], func(t *testing.T, rec *attachment.Record) {
			if len(rec.Attachments) != 2 || rec.Attachments[1].Result != nil {
				t.Errorf("decoded %+v", rec)
			}
		}},
		{"version 1, without VF settings", bytes.Replace(file(t, withoutVF(sample())), []byte(`"version":2`), []byte(`"version":1`), 1),
			func(t *testing.T, rec *attachment.Record) {
				if rec.Version != 1 || len(rec.Attachments) != 2 || rec.Attachments[1].VF != nil || rec.Attachments[1].DeviceID != "0000:3b:02.0" || len(rec.Skipped) != 0 {
					t.Errorf("decoded %+v", rec)
				}
			}},
		{"unversioned is version 1", []byte(unversioned), func(t *testing.T, rec *attachment.Record) {
			if rec.Version != 1 || len(rec.Attachments) != 1 || rec.Attachments[0].IfName != "net1" || len(rec.Skipped) != 0 {
				t.Errorf("decoded %+v", rec)
			}
		}},
		{"newer keeps what teardown needs", []byte(newer), func(t *testing.T, rec *attachment.Record) {
			a := rec.Attachments
			if rec.Version != 7 || rec.ContainerID != "c1" || rec.Netns != "/run/netns/x" || len(a) != 1 ||
				a[0].IfName != "net1" || string(a[0].ConfList) != confList || len(rec.Skipped) != 3 {
				t.Errorf("decoded %+v", rec)
			}
		}},
		{"odd shape: attachments not a list", []byte(`{"version":1,"containerID":"c1","attachments":{"a":1}}`), func(t *testing.T, rec *attachment.Record) {
			if rec.ContainerID != "c1" || len(rec.Attachments) != 0 || len(rec.Skipped) != 1 {
				t.Errorf("decoded %+v", rec)
			}
		}},
		{"odd shape: confList a string", []byte(`{"version":1,"containerID":"c1","attachments":[{"ifName":"net1","confList":"x"}]}`),
			func(t *testing.T, rec *attachment.Record) {
				if len(rec.Attachments) != 0 || len(rec.Skipped) != 1 || !strings.Contains(rec.Skipped[0], "attachments[0]") {
					t.Errorf("decoded %+v", rec)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec, err := attachment.Decode(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			tt.want(t, rec)
		})
	}
}

func jsonOf(t testing.TB, rec *attachment.Record) string {
	data, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestDecode_Refused(t *testing.T) {
	whole := file(t, sample())
	formattest.Refused(t, "attachment record", attachment.Decode, []formattest.Refusal{
		{Name: "torn", Data: whole[:40], Is: fileformat.ErrMalformed, Want: "unexpected EOF"},
		{Name: "empty", Data: nil, Is: fileformat.ErrMalformed, Want: "EOF"},
		{Name: "not an object", Data: []byte(`null`), Is: fileformat.ErrMalformed, Want: "not a JSON object"},
		{Name: "version not a number", Data: []byte(`{"version":"1"}`), Is: fileformat.ErrMalformed, Want: "version"},
		{Name: "negative version", Data: []byte(`{"version":-1}`), Is: fileformat.ErrMalformed, Want: "version -1"},
		{Name: "oversize", Data: formattest.Oversize(attachment.MaxSize), Is: fileformat.ErrTooLarge, Want: fmt.Sprintf("more than %d bytes", attachment.MaxSize)},
	})
}

func TestLoad_NamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c1.json")
	if _, err := attachment.Load(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if err := os.WriteFile(path, []byte(`{"containerID":`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := attachment.Load(path); !errors.Is(err, fileformat.ErrMalformed) || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want an error naming %s", err, path)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(file(f, sample()))
	f.Add([]byte(unversioned))
	f.Add([]byte(newer))
	f.Add([]byte(`{"attachments":[1,{"ifName":"a","confList":{}}]}` + "\n[null,{}]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := attachment.Decode(data)
		if err != nil {
			return
		}
		for i, a := range rec.Attachments {
			if a.IfName == "" || len(a.ConfList) == 0 {
				t.Fatalf("attachment %d cannot be torn down: %+v", i, a)
			}
		}
		again, err := attachment.Decode(file(t, rec))
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		rec.Version, rec.Skipped, again.Skipped = attachment.Version, nil, nil
		if jsonOf(t, rec) != jsonOf(t, again) {
			t.Fatalf("round trip changed %s into %s", jsonOf(t, rec), jsonOf(t, again))
		}
	})
}

package vfadmin_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hwnet-io/hwnet/api/vfsettings"
	"github.com/hwnet-io/hwnet/node/vfadmin"
)

var vf = vfadmin.VF{PF: "enp59s0f0", Index: 1, PCIAddress: "0000:3b:01.1"}

func settings(t *testing.T, raw string) vfsettings.Settings {
	t.Helper()
	s, err := vfsettings.Parse(json.RawMessage(raw), "test")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func recorded(t *testing.T, r *vfadmin.Recorder) []string {
	t.Helper()
	calls, err := vfadmin.ReadCalls(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range calls {
		if c.PF != vf.PF || c.VF != vf.Index || c.PCIAddress != vf.PCIAddress {
			t.Errorf("call %+v on another VF", c)
		}
		out = append(out, c.Op+" "+c.Value)
	}
	return out
}

// TestApplyReset: Apply makes one call per setting given, in sriov-cni's
// order; Reset of a record without the VF's prior settings (an older
// hwnet's) puts back the defaults of those settings only, the MAC as one
// the PF does not administer, never the netdev's own.
func TestApplyReset(t *testing.T) {
	tests := []struct {
		name       string
		raw        string
		original   vfsettings.Original
		want, back []string
	}{
		{"vlan and max rate", `{"vlan":100,"maxTxRate":1000}`, vfsettings.Original{},
			[]string{"vlan 100 qos 0 proto 802.1Q", "rate 0-1000"}, []string{"vlan 0 qos 0 proto 802.1Q", "rate 0-0"}},
		{"every setting", `{"vlan":7,"vlanQoS":5,"vlanProto":"802.1ad","spoofchk":false,"trust":true,"minTxRate":100,"maxTxRate":1000,"linkState":"disable","mtu":9000,"macAddress":"02:00:00:00:00:01"}`,
			vfsettings.Original{MAC: "52:54:00:00:00:01", MTU: 1500},
			[]string{"macAddress 02:00:00:00:00:01", "vlan 7 qos 5 proto 802.1ad", "spoofchk off", "trust on", "rate 100-1000", "linkState disable", "mtu 9000"},
			[]string{"macAddress 00:00:00:00:00:00", "vlan 0 qos 0 proto 802.1Q", "spoofchk on", "trust off", "rate 0-0", "linkState auto", "mtu 1500"}},
		{"nothing", `{}`, vfsettings.Original{}, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "sub", "calls.jsonl"))
			s := settings(t, tt.raw)
			if err := vfadmin.Apply(context.Background(), r, vf, s, nil); err != nil {
				t.Fatal(err)
			}
			if got := recorded(t, r); !slices.Equal(got, tt.want) {
				t.Errorf("apply\n got %q\nwant %q", got, tt.want)
			}
			rec := vfsettings.Record{PF: vf.PF, Index: vf.Index, PCIAddress: vf.PCIAddress, Settings: s, Original: tt.original}
			if err := vfadmin.Reset(context.Background(), r, rec); err != nil {
				t.Fatal(err)
			}
			if got := recorded(t, r)[len(tt.want):]; !slices.Equal(got, tt.back) {
				t.Errorf("reset\n got %q\nwant %q", got, tt.back)
			}
		})
	}
}

// TestReset_PutsBackWhatTheVFHad: the record reads the VF's settings from
// its PF before the first change (an admin's VLAN 42 and spoofchk off, a
// rate, a MAC the PF does not administer) and a reset puts exactly those
// back, not the kernel's defaults; the Recorder's Read then says so.
func TestReset_PutsBackWhatTheVFHad(t *testing.T) {
	ctx := context.Background()
	r := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))
	if err := r.Seed(ctx, vf, settings(t, `{"vlan":42,"spoofchk":false,"maxTxRate":500}`)); err != nil {
		t.Fatal(err)
	}
	var admin vfsettings.Settings
	mustUnmarshal(t, `{"vlan":42,"vlanQoS":0,"vlanProto":"802.1Q","spoofchk":false,"trust":false,"minTxRate":0,"maxTxRate":500,"linkState":"auto","macAddress":"00:00:00:00:00:00"}`, &admin)
	s := settings(t, `{"vlan":100,"spoofchk":true,"trust":true,"maxTxRate":1000,"macAddress":"02:00:00:00:00:01"}`)
	rec, err := vfadmin.NewRecord(ctx, r, vf, vfsettings.Original{MAC: "52:54:00:00:00:01", MTU: 1500}, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := vfadmin.Apply(ctx, r, vf, s, nil); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Read(ctx, vf); got.VLAN == nil || *got.VLAN != 100 {
		t.Fatalf("read after apply: %+v, want VLAN 100", got)
	}
	if err := vfadmin.Reset(ctx, r, *rec); err != nil {
		t.Fatal(err)
	}
	got, err := r.Read(ctx, vf)
	if err != nil {
		t.Fatal(err)
	}
	got.MTU = admin.MTU
	if g, w := mustJSON(t, got), mustJSON(t, admin); g != w {
		t.Errorf("after the reset the VF has\n %s\nwant what it had before\n %s", g, w)
	}
}

func mustUnmarshal(t *testing.T, raw string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(raw), v); err != nil {
		t.Fatal(err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// refusing fails the calls named in refuse with err, recording the rest.
type refusing struct {
	*vfadmin.Recorder
	err error
}

func (r refusing) SetSpoofChk(context.Context, vfadmin.VF, bool) error { return r.err }

type refusingRate struct{ *vfadmin.Recorder }

func (refusingRate) SetRate(context.Context, vfadmin.VF, uint64, uint64) error {
	return errors.New("operation not supported")
}

// TestApplyNamesTheField: a refused setting is named as the format the
// user wrote names it: a claim configuration's, or a NAD's (sriov-cni's).
func TestApplyNamesTheField(t *testing.T) {
	for _, tt := range []struct {
		settings string
		names    vfsettings.Names
		want     string
	}{
		{`{"maxTxRate":1000}`, nil, `set "maxTxRate": `},
		{`{"maxTxRate":1000}`, vfsettings.SRIOVCNINames, `set "max_tx_rate": `},
		{`{"minTxRate":10,"maxTxRate":1000}`, vfsettings.SRIOVCNINames, `set "min_tx_rate" and "max_tx_rate": `},
		{`{"minTxRate":10}`, nil, `set "minTxRate": `},
	} {
		r := refusingRate{vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))}
		err := vfadmin.Apply(context.Background(), r, vf, settings(t, tt.settings), tt.names)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("apply %s with names %v: %v, want %q", tt.settings, tt.names, err, tt.want)
		}
	}
}

// TestApplyStops_ResetGoesOn: Apply stops at the first refused setting,
// naming it; Reset makes every call and reports the refused ones, but a
// PF or netdev that is gone is nothing to reset.
func TestApplyStops_ResetGoesOn(t *testing.T) {
	s := settings(t, `{"vlan":100,"spoofchk":false,"trust":true}`)
	rec := vfsettings.Record{PF: vf.PF, Index: vf.Index, PCIAddress: vf.PCIAddress, Settings: s}
	for _, tt := range []struct {
		name     string
		err      error
		resetErr string
	}{
		{"refused", errors.New("operation not supported"), `VF 1 of enp59s0f0 (0000:3b:01.1): reset "spoofchk": operation not supported`},
		{"gone", fmt.Errorf("PF enp59s0f0: %w", vfadmin.ErrGone), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := refusing{vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl")), tt.err}
			err := vfadmin.Apply(context.Background(), r, vf, s, nil)
			if err == nil || !strings.Contains(err.Error(), `VF 1 of enp59s0f0 (0000:3b:01.1): set "spoofchk": `) {
				t.Errorf("apply: %v, want the refused setting named", err)
			}
			if got := recorded(t, r.Recorder); !slices.Equal(got, []string{"vlan 100 qos 0 proto 802.1Q"}) {
				t.Errorf("apply's calls %q, want only the VLAN's", got)
			}
			err = vfadmin.Reset(context.Background(), r, rec)
			if (tt.resetErr == "") != (err == nil) || (err != nil && err.Error() != tt.resetErr) {
				t.Errorf("reset: %v, want %q", err, tt.resetErr)
			}
			if got := recorded(t, r.Recorder)[1:]; !slices.Equal(got, []string{"vlan 0 qos 0 proto 802.1Q", "trust off"}) {
				t.Errorf("reset's calls %q, want the VLAN's and trust's", got)
			}
		})
	}
}

// TestRecorder_ConcurrentCallsWholeLines: calls from many goroutines at
// once each land as one whole line.
func TestRecorder_ConcurrentCallsWholeLines(t *testing.T) {
	r := vfadmin.NewRecorder(filepath.Join(t.TempDir(), "calls.jsonl"))
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			if err := r.SetMTU(context.Background(), vfadmin.VF{PF: "p", Index: i}, 1500+i); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	calls, err := vfadmin.ReadCalls(r.Path())
	if err != nil || len(calls) != 50 {
		t.Fatalf("%d calls (%v), want 50", len(calls), err)
	}
}

// TestNew: the --vf-admin values.
func TestNew(t *testing.T) {
	for _, tt := range []struct {
		spec, want string
	}{
		{"netlink", "vfadmin.Netlink"},
		{"record:/tmp/x.jsonl", "*vfadmin.Recorder"},
		{"record:", `VF admin "record:": want "netlink" or "record:PATH"`},
		{"ioctl", `VF admin "ioctl": want "netlink" or "record:PATH"`},
	} {
		a, err := vfadmin.New(tt.spec, "", "")
		got := fmt.Sprintf("%T", a)
		if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("New(%q): %s, want %s", tt.spec, got, tt.want)
		}
	}
}

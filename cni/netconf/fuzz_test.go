package netconf

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		spec3_2_1, spec3_2_2, spec3_2_3, spec3_4_2_1, sriovList,
		`{"cniVersions":["0.4.0","1.1.0"],"name":"n","disableCheck":"true","disableGC":false,"plugins":[{"type":"a","args":{"cni":{}}}]}`,
		`{"name":"n","type":"a","capabilities":{"mac":true,"ips":false},"Device":"eth0","x":"<&>"}`,
		`{"name":"n","plugins":[{"type":"a"},{"Type":"b"}]}`,
		`{"name":"n","plugins":[]}`, `{"plugins":[{"type":"0","ipAm":""}]}`,
		`{"name":"n","plugins":[{"type":"host-device","vlan":100,"vlanQoS":1,"spoofchk":"off","trust":"on","max_tx_rate":1000,"link_state":"auto","mac":"02:00:00:00:00:01","mtu":9000}]}`, `{"type":"../x"}`, `[]`, `null`, `{"cniVersion":"9.9.9","type":"a"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := Parse(data, "fuzz-nad", "fuzz")
		if err != nil {
			return
		}
		b, err := d.Bytes()
		if err != nil {
			t.Fatalf("Bytes of an accepted config: %v", err)
		}
		again, err := Parse(b, "fuzz-nad", "fuzz")
		if err != nil {
			t.Fatalf("re-parse of %s: %v", b, err)
		}
		if !reflect.DeepEqual(again, d) {
			t.Fatalf("re-parse differs:\n got %+v\nwant %+v", again, d)
		}
		libcniList(t, d)
		if vf, err := d.VFSettings(); err == nil {
			if again := vf; again.Validate("fuzz") != nil || again != vf {
				t.Fatalf("VF settings %+v accepted but not valid", vf)
			}
		}
		injected, err := d.Inject(Injection{
			DeviceID: "0000:3b:02.1", DeviceInfoFile: "/x.json",
			CNIArgs: map[string]json.RawMessage{"k": json.RawMessage(`"v"`)},
		})
		if err != nil {
			return
		}
		libcniList(t, injected)
	})
}

// libcniList is d as libcni reads it, which a runtime or Multus would run;
// it fails t when libcni refuses what hwnet accepted.
func libcniList(t testing.TB, d *Delegate) *libcni.NetworkConfigList {
	t.Helper()
	b, err := d.Bytes()
	if err != nil {
		t.Fatalf("Bytes: %v", err)
	}
	list, err := libcni.NetworkConfFromBytes(b)
	if err != nil {
		t.Fatalf("libcni refused %s: %v", b, err)
	}
	return list
}

func BenchmarkParseInjectBytes(b *testing.B) {
	config := []byte(sriovList)
	in := Injection{
		DeviceID:       "0000:3b:02.1",
		DeviceInfoFile: "/var/run/k8s.cni.cncf.io/devinfo/cni/sriov-net-0123456789ab-net1-device-info.json",
		CNIArgs:        map[string]json.RawMessage{"spoofchk": json.RawMessage(`"on"`)},
	}
	b.ReportAllocs()
	for b.Loop() {
		d, err := Parse(config, "sriov-net", "NetworkAttachmentDefinition ns/sriov-net spec.config")
		if err != nil {
			b.Fatal(err)
		}
		injected, err := d.Inject(in)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := injected.Bytes(); err != nil {
			b.Fatal(err)
		}
	}
}

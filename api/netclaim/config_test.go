package netclaim_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/api/netclaim"
)

const src = "claim ns/c config[0]"

// TestParse_NPWG4_1_2: the configuration's "networks" takes the NPWG JSON
// list format (4.1.2) with the annotation's checks, errors naming the
// configuration and the field instead of the annotation.
func TestParse_NPWG4_1_2(t *testing.T) {
	tests := []struct {
		name, raw, wantErr string
		wantNets           int
	}{
		{"valid", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"sriov-net","infiniband-guid":"00:11:22:33:44:55:66:77"}]}`, "", 1},
		{"namespace defaults to the claim's", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a"},{"name":"b","namespace":"other"}]}`, "", 2},
		{"not JSON", `{`, src + ": unexpected EOF", 0},
		{"missing networks", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig"}`, src + `: "networks": required key is missing`, 0},
		{"empty networks", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[]}`, src + `: "networks": the list is empty`, 0},
		{"networks an object", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":{"name":"a"}}`, src + ` "networks": a JSON list is required (4.1.2)`, 0},
		{"bad key", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a","ip":"10.0.0.1"}]}`, src + ` "networks" element 0 ("a"): "ip" "10.0.0.1": unknown key`, 0},
		{"duplicate interface", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a","interface":"net1"},{"name":"a","interface":"net1"}]}`, `element 1 ("a"): "interface" "net1": element 0 already asks`, 0},
		{"device key in cni-args", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a","cni-args":{"deviceID":"0000:3b:01.1"}}]}`, `"cni-args.deviceID"`, 0},
		{"unknown top-level field", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a"}],"interfaces":["x"]}`, `unknown field "interfaces"`, 0},
		{"wrong kind", `{"apiVersion":"hwnet.io/v1alpha1","kind":"Net","networks":[{"name":"a"}]}`, `"kind" "Net"`, 0},
		{"vf settings", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a"}],"vf":{"vlan":100,"maxTxRate":1000}}`, "", 1},
		{"bad vf setting names it", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a"}],"vf":{"vlan":5000}}`, src + ` "vf": "vlan" 5000: want 0 to 4095`, 0},
		{"unknown vf key", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a"}],"vf":{"vlanId":5}}`, src + ` "vf": json: unknown field "vlanId"`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nw, err := netclaim.Parse([]byte(tt.raw), "ns", src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(nw.Selections) != tt.wantNets || len(nw.Elements) != tt.wantNets {
				t.Fatalf("%+v (%v), want %d networks", nw, err, tt.wantNets)
			}
			if nw.Selections[0].Namespace != "ns" {
				t.Errorf("namespace %q, want the claim's", nw.Selections[0].Namespace)
			}
		})
	}
}

// TestParse_VFAlone: a configuration may give VF settings without
// networks, for devices no network attaches (a VF on vfio-pci); each
// device gets none, and one MAC cannot serve two devices.
func TestParse_VFAlone(t *testing.T) {
	nw, err := netclaim.Parse([]byte(`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","vf":{"trust":true}}`), "ns", src)
	if err != nil || nw.VF.Trust == nil || !*nw.VF.Trust || len(nw.Selections) != 0 {
		t.Fatalf("%+v (%v), want trust and no networks", nw, err)
	}
	if elems, err := nw.ForDevices(2, src); err != nil || len(elems) != 2 || elems[0] != nil {
		t.Errorf("ForDevices: %q (%v), want two devices without a network", elems, err)
	}
	nw, err = netclaim.Parse([]byte(`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","vf":{"macAddress":"02:00:00:00:00:01"}}`), "ns", src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := nw.ForDevices(2, src); err == nil || !strings.Contains(err.Error(), `"macAddress" "02:00:00:00:00:01" cannot serve 2 devices`) {
		t.Errorf("ForDevices(2) with a MAC: %v", err)
	}
}

// TestParse_Driver: a configuration may name the driver its VFs are
// bound to, alone or beside networks and VF settings; a name that cannot
// be a kernel driver's is refused naming the key and the value.
func TestParse_Driver(t *testing.T) {
	tests := []struct {
		name, raw, want, wantErr string
	}{
		{"alone", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","driver":"vfio-pci"}`, "vfio-pci", ""},
		{"with networks", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","driver":"iavf","networks":[{"name":"a"}]}`, "iavf", ""},
		{"absent", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a"}]}`, "", ""},
		{"a path", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","driver":"../vfio-pci"}`, "", src + `: "driver": "../vfio-pci": '.' is not a driver name's character`},
		{"too long", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","driver":"` + strings.Repeat("d", 65) + `"}`, "", `longer than 64 characters`},
		{"not a string", `{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","driver":1}`, "", src + `: json: cannot unmarshal number`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nw, err := netclaim.Parse([]byte(tt.raw), "ns", src)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || nw.Driver != tt.want {
				t.Fatalf("driver %q (%v), want %q", nw.Driver, err, tt.want)
			}
		})
	}
}

// TestSelections_NPWG4_1_2_1_5: the claim networks of a pod are parsed
// together, so interface names are unique across its claims.
func TestSelections_NPWG4_1_2_1_5(t *testing.T) {
	devs := []netclaim.Device{{Network: json.RawMessage(`{"name":"a","interface":"net1"}`)}, {}, {Network: json.RawMessage(`{"name":"b"}`)}}
	sels, idx, err := netclaim.Selections(devs, "ns")
	if err != nil || len(sels) != 2 || idx[0] != 0 || idx[1] != 2 || sels[1].Name != "b" {
		t.Fatalf("%+v %v (%v)", sels, idx, err)
	}
	devs[2].Network = json.RawMessage(`{"name":"b","interface":"net1"}`)
	if _, _, err := netclaim.Selections(devs, "ns"); err == nil || !strings.Contains(err.Error(), "the pod's claim networks element 1") {
		t.Errorf("err %v, want a duplicate interface", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"a","ips":["10.0.0.1/24"]}]}`))
	f.Add([]byte(`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":"a,b"}`))
	f.Add([]byte(`{"networks":[{"name":"a"},{"name":"b","mac":"02:00:00:00:00:01"}]}`))
	f.Add([]byte(`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","driver":"vfio-pci"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		nw, err := netclaim.Parse(raw, "ns", src)
		if err != nil {
			if !strings.Contains(err.Error(), src) {
				t.Errorf("error %q does not name the configuration", err)
			}
			return
		}
		alone := !nw.VF.IsZero() || nw.Driver != "" // a configuration without networks
		if len(nw.Elements) != len(nw.Selections) || (len(nw.Selections) == 0 && !alone) {
			t.Errorf("%d elements, %d selections", len(nw.Elements), len(nw.Selections))
		}
		for n := 1; n <= 3; n++ {
			if elems, err := nw.ForDevices(n, src); err == nil && len(elems) != n {
				t.Errorf("ForDevices(%d) gave %d", n, len(elems))
			}
		}
	})
}

// TestPodNetworkOf: an element names a KEP-3698 PodNetwork only with
// hwnet's extension key set to true.
func TestPodNetworkOf(t *testing.T) {
	for elem, want := range map[string]string{
		`{"name":"dataplane","multinetwork.hwnet.io/podNetwork":true,"interface":"net1"}`: "dataplane",
		`{"name":"dataplane","multinetwork.hwnet.io/podNetwork":false}`:                   "",
		`{"name":"sriov-net"}`: "",
		`not json`:             "",
		``:                     "",
	} {
		if got := netclaim.PodNetworkOf(json.RawMessage(elem)); got != want {
			t.Errorf("PodNetworkOf(%s) = %q, want %q", elem, got, want)
		}
	}
	if _, err := netclaim.Parse([]byte(`{"apiVersion":"hwnet.io/v1alpha1","kind":"NetworkConfig","networks":[{"name":"dataplane","multinetwork.hwnet.io/podNetwork":true}]}`), "ns", "claim"); err != nil {
		t.Errorf("an element with the extension key: %v, want accepted (NPWG 4.1.2.1 lets dotted keys through)", err)
	}
}

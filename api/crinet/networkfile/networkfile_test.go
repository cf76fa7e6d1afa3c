package networkfile_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hwnet-io/hwnet/internal/fileformat/formattest"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/hwnet-io/hwnet/api/crinet/networkfile"
	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/internal/fileformat"
)

// sample is a network as SetPodNetwork stores it.
func sample() *crinetapi.NetworkConfig {
	return &crinetapi.NetworkConfig{
		Metadata: &crinetapi.NetworkMetadata{Name: "sriov-a", Namespace: "cnf", Uid: "u1", Generation: 3,
			Annotations: map[string]string{"k8s.v1.cni.cncf.io/resourceName": "hwnet.io/vf"}},
		IpRanges: []*crinetapi.IPRange{{Cidr: "10.56.0.0/24"}},
		Cniv1Config: &crinetapi.CNIv1Config{CniVersion: "1.0.0", Plugins: []*crinetapi.CNIv1PluginConfig{
			{Type: "sriov", Capabilities: []string{"ips"}, Parameters: map[string]string{"vlan": "100"}}}},
	}
}

func encoded(t testing.TB, cfg *crinetapi.NetworkConfig) []byte {
	data, err := networkfile.Encode(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// unversioned is a network file as hwnet wrote them before they had a
// version: the NetworkConfig alone.
func unversioned(t testing.TB) []byte {
	data, err := protojson.MarshalOptions{Multiline: true}.Marshal(sample())
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// newer is a network file of a future version, with fields this one
// does not know, in the envelope and in the network.
const newer = `{"version": 5, "checksum": {"sha256": "x"}, "owner": "y",
"network": {"metadata": {"name": "sriov-a", "namespace": "cnf", "uid": "u1", "generation": 3,
  "annotations": {"k8s.v1.cni.cncf.io/resourceName": "hwnet.io/vf"}},
  "ipRanges": [{"cidr": "10.56.0.0/24"}], "mtu": 9000,
  "cniv1Config": {"cniVersion": "1.0.0", "plugins": [{"type": "sriov", "capabilities": ["ips"], "parameters": {"vlan": "100"}}]}}}`

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		version int
	}{
		{"current round trip", encoded(t, sample()), networkfile.Version},
		{"unversioned is version 1", unversioned(t), 1},
		{"newer drops what it does not know", []byte(newer), 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stored, err := networkfile.Decode(tt.data)
			if err != nil {
				t.Fatal(err)
			}
			if stored.Version != tt.version || !proto.Equal(stored.Config, sample()) {
				t.Errorf("decoded version %d %v, want version %d %v", stored.Version, stored.Config, tt.version, sample())
			}
		})
	}
}

func TestDecode_Refused(t *testing.T) {
	current := encoded(t, sample())
	formattest.Refused(t, "CRI network file", networkfile.Decode, []formattest.Refusal{
		{Name: "torn", Data: current[:len(current)-3], Is: fileformat.ErrMalformed, Want: "unexpected EOF"},
		{Name: "not an object", Data: []byte(`"x"`), Is: fileformat.ErrMalformed, Want: "not a JSON object"},
		{Name: "checksum mismatch", Data: bytes.Replace(current, []byte("sriov-a"), []byte("sriov-b"), 1), Is: fileformat.ErrChecksum, Want: "network sum to"},
		{Name: "no network", Data: []byte(`{"version":2,"checksum":1}`), Is: fileformat.ErrMalformed, Want: "no network"},
		{Name: "unversioned with an unknown field", Data: []byte(`{"metadata":{"name":"a"},"mtu":1}`), Is: fileformat.ErrMalformed, Want: "not a NetworkConfig"},
		{Name: "oversize", Data: formattest.Oversize(networkfile.MaxSize), Is: fileformat.ErrTooLarge, Want: fmt.Sprintf("more than %d bytes", networkfile.MaxSize)},
	})
}

func TestLoad_NamesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cnf_sriov-a.json")
	if err := os.WriteFile(path, []byte(`{"version":2,"checksum":7,"network":{}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := networkfile.Load(path); !errors.Is(err, fileformat.ErrChecksum) || !strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want a checksum error naming %s", err, path)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(encoded(f, sample()))
	f.Add(encoded(f, &crinetapi.NetworkConfig{}))
	f.Add(unversioned(f))
	f.Add([]byte(newer))
	f.Fuzz(func(t *testing.T, data []byte) {
		stored, err := networkfile.Decode(data)
		if err != nil {
			return
		}
		again, err := networkfile.Decode(encoded(t, stored.Config))
		if err != nil {
			t.Fatalf("re-encoded network does not decode: %v", err)
		}
		if !proto.Equal(stored.Config, again.Config) {
			t.Fatalf("round trip changed %v into %v", stored.Config, again.Config)
		}
	})
}

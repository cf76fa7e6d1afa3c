package pools_test

import (
	"regexp"
	"testing"

	"github.com/hwnet-io/hwnet/node/pools"
)

// validEnvName is what POSIX shells accept as a variable name.
var validEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// TestEnvName: sriovdp's PCIDEVICE_<PREFIX>_<NAME>, always a name a shell
// accepts, also where sriovdp's is not (hyphens).
func TestEnvName(t *testing.T) {
	for _, tt := range []struct {
		prefix, name, want string
	}{
		{"intel.com", "sriov_net", "PCIDEVICE_INTEL_COM_SRIOV_NET"},
		{"intel.com", "sriov-net", "PCIDEVICE_INTEL_COM_SRIOV_NET"},
		{"example-corp.io", "fast.net", "PCIDEVICE_EXAMPLE_CORP_IO_FAST_NET"},
		{"nvidia.com", "ib0", "PCIDEVICE_NVIDIA_COM_IB0"},
		{"x.io", "né", "PCIDEVICE_X_IO_N__"}, // é is two bytes
	} {
		r := pools.Resource{Prefix: tt.prefix, Name: tt.name}
		if got := r.EnvName(); got != tt.want || !validEnvName.MatchString(got) {
			t.Errorf("%s/%s: %q, want %q", tt.prefix, tt.name, got, tt.want)
		}
	}
}

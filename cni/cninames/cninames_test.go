package cninames_test

import (
	"reflect"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"

	"github.com/hwnet-io/hwnet/cni/cninames"
)

// validators pairs each check with libcni's, whose answers it must give.
var validators = []struct {
	name   string
	hwnet  func(string) *types.Error
	libcni func(string) *types.Error
}{
	{"container ID", cninames.ValidateContainerID, utils.ValidateContainerID},
	{"network name", cninames.ValidateNetworkName, utils.ValidateNetworkName},
	{"interface name", cninames.ValidateInterfaceName, utils.ValidateInterfaceName},
}

func checkParity(t *testing.T, input string) {
	t.Helper()
	for _, v := range validators {
		got, want := v.hwnet(input), v.libcni(input)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s %q: got %+v, libcni gives %+v", v.name, input, got, want)
		}
	}
}

func TestValidatorsAnswerAsLibcni(t *testing.T) {
	inputs := []string{
		"", ".", "..", "...", "a", "A9", "9a", "_a", "-a", ".a", "a_b.c-d", "a b", "a\tb", "a\n", "\n",
		"eth0", "net1", "ib0", "a/b", "a:b", "0123456789abcde", "0123456789abcdef",
		"e1d2a3f4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2",
		"café", "eth\u00a0", "eth\u2028", "é", "\xff", "a\xffb", "a\x00", "net$", "net!",
	}
	for _, in := range inputs {
		checkParity(t, in)
	}
}

func FuzzValidatorsAnswerAsLibcni(f *testing.F) {
	for _, seed := range []string{"", "eth0", "a b", "café", "0123456789abcdef", ".."} {
		f.Add(seed)
	}
	f.Fuzz(checkParity)
}

// Package vfrecord reads, for tests, the VF settings calls a
// vfadmin.Recorder wrote.
package vfrecord

import (
	"testing"

	"github.com/hwnet-io/hwnet/node/vfadmin"
)

// Ops is each call r recorded on the VF at pci, in order, as "op value";
// what was seeded (Recorder.Seed) is not hwnet's and is left out.
func Ops(t testing.TB, r *vfadmin.Recorder, pci string) []string {
	t.Helper()
	calls, err := vfadmin.ReadCalls(r.Path())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range calls {
		if c.PCIAddress == pci && !c.Seed {
			out = append(out, c.Op+" "+c.Value)
		}
	}
	return out
}

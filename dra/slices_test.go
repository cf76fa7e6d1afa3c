package dra

import (
	"fmt"
	"reflect"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/hwnet-io/hwnet/node/discovery"
	"github.com/hwnet-io/hwnet/node/offer"
	"github.com/hwnet-io/hwnet/node/pools"
)

// layoutPool is a pool of n VFs on bus bus, listed in reverse order.
func layoutPool(name string, bus, n int) Pool {
	p := Pool{Resource: pools.Resource{Prefix: "intel.com", Name: name}}
	for i := n - 1; i >= 0; i-- {
		id := fmt.Sprintf("0000:%02x:%02x.%d", bus, i/8, i%8)
		p.Devices = append(p.Devices, offer.State{Device: pools.Device{ID: id, VFIndex: i, Function: &discovery.Function{Address: id, NUMANode: -1}}, Healthy: true})
	}
	return p
}

// A layout's slices, each made alone, are the node's devices in the
// order Devices gives, MaxSliceDevices at most each, one empty slice for
// no device.
func TestLayoutSlices(t *testing.T) {
	tests := []struct {
		name   string
		ps     []Pool
		slices int
	}{
		{"no pool", nil, 1},
		{"an empty pool", []Pool{layoutPool("a", 0x3b, 0)}, 1},
		{"one slice exactly", []Pool{layoutPool("a", 0x3b, MaxSliceDevices)}, 1},
		{"two pools over three slices", []Pool{layoutPool("a", 0x5e, 2*MaxSliceDevices-5), layoutPool("b", 0x3b, MaxSliceDevices/2)}, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := Node{SysfsRoot: t.TempDir()}
			l, err := newLayout(node, tt.ps)
			if err != nil {
				t.Fatal(err)
			}
			if l.slices() != tt.slices {
				t.Fatalf("%d slices, want %d", l.slices(), tt.slices)
			}
			var all []resourceapi.Device
			for i := range l.slices() {
				s := l.slice(i)
				if len(s) > MaxSliceDevices {
					t.Errorf("slice %d: %d devices", i, len(s))
				}
				all = append(all, s...)
			}
			want, err := Devices(node, tt.ps)
			if err != nil {
				t.Fatal(err)
			}
			if len(all) != len(want) || (len(want) > 0 && !reflect.DeepEqual(all, want)) {
				t.Fatalf("slices list %d devices, want Devices' %d in its order", len(all), len(want))
			}
			if len(want) > 0 && (want[0].Name != DeviceName(tt.ps[0].Devices[len(tt.ps[0].Devices)-1].ID)) {
				t.Errorf("first device %s, want the first pool's lowest address", want[0].Name)
			}
		})
	}
}

// The sender gives the latest layout to every sync after it: a
// republish compares the same devices made again.
func TestSliceSenderLatest(t *testing.T) {
	s := newSliceSender(nil)
	if s.next() != nil {
		t.Fatal("devices to send before the first send")
	}
	first, second := &layout{}, &layout{}
	s.send(first)
	s.send(nil)
	if s.next() != first {
		t.Fatal("republish: not the devices last sent")
	}
	s.send(second)
	if s.next() != second {
		t.Fatal("not the newer devices")
	}
}

package virtualnode

import "testing"

func TestCharDevice(t *testing.T) {
	tests := []struct {
		rel          string
		major, minor uint32
		wantErr      bool
	}{
		{rel: "vfio/vfio", major: 10, minor: 196},
		{rel: "vfio/8", major: vfioGroupMajor, minor: 8},
		{rel: "vfio/noiommu-3", major: vfioGroupMajor, minor: 3},
		{rel: "infiniband/uverbs2", major: 231, minor: 194},
		{rel: "infiniband/umad1", major: 231, minor: 1},
		{rel: "infiniband/issm1", major: 231, minor: 65},
		{rel: "infiniband/rdma_cm", major: 10, minor: rdmaCMMinor},
		{rel: "uio0", major: uioMirrorMajor, minor: 0},
		{rel: "vfio/08", wantErr: true},
		{rel: "vfio/-1", wantErr: true},
		{rel: "vfio/65536", wantErr: true},
		{rel: "infiniband/uverbs", wantErr: true},
		{rel: "net/tun", wantErr: true},
		{rel: "vfio/8/x", wantErr: true},
	}
	for _, tt := range tests {
		major, minor, err := charDevice(tt.rel)
		if (err != nil) != tt.wantErr {
			t.Errorf("charDevice(%q): error %v, want error %v", tt.rel, err, tt.wantErr)
			continue
		}
		if major != tt.major || minor != tt.minor {
			t.Errorf("charDevice(%q) = %d:%d, want %d:%d", tt.rel, major, minor, tt.major, tt.minor)
		}
	}
}

func FuzzCharDevice(f *testing.F) {
	for _, seed := range []string{"vfio/vfio", "vfio/8", "vfio/noiommu-0", "infiniband/uverbs0", "uio3", "", "vfio/", "infiniband/issm99999999999"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		major, minor, err := charDevice(rel)
		if err != nil {
			return
		}
		if major == 0 || minor >= 1<<20 {
			t.Errorf("charDevice(%q) = %d:%d: not a valid device number", rel, major, minor)
		}
	})
}

package crinet_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/hwnet-io/hwnet/api/crinet/networkfile"
	crinetapi "github.com/hwnet-io/hwnet/api/crinet/v1alpha1"
	"github.com/hwnet-io/hwnet/cni/crinet"
)

// sizedNetwork is sriovNetwork padded with a plugin parameter until its
// encoding is size bytes.
func sizedNetwork(t *testing.T, name string, size int) *crinetapi.NetworkConfig {
	t.Helper()
	cfg := sriovNetwork("cnf", name)
	params := cfg.Cniv1Config.Plugins[0].Parameters
	pad := 0
	for range 10 { // a few steps: lengths' varints grow with them
		params["pad"] = `"` + strings.Repeat("x", pad) + `"`
		if diff := size - proto.Size(cfg); diff != 0 && pad+diff >= 0 {
			pad += diff
		}
	}
	if got := proto.Size(cfg); got != size {
		t.Fatalf("padded network %s is %d bytes, want %d", name, got, size)
	}
	return cfg
}

// networkFiles are the files in the store's directory.
func (h *harness) networkFiles() []string {
	h.t.Helper()
	files, err := filepath.Glob(filepath.Join(h.dir, "networks", "*.json"))
	if err != nil {
		h.t.Fatal(err)
	}
	return files
}

// TestCRINet_SetPodNetwork_SizeLimits: a network over the per-network limit
// is refused, naming the field and the limit, before anything is written,
// however close it is to gRPC's message limit; networks that together
// exceed the total limit are refused with ResourceExhausted; and List
// answers every client, whatever was asked of Set.
func TestCRINet_SetPodNetwork_SizeLimits(t *testing.T) {
	h := newHarness(t)
	for _, size := range []int{crinet.MaxNetworkBytes + 1, 4<<20 - 1024} {
		_, err := h.set(sizedNetwork(t, fmt.Sprintf("big-%d", size), size))
		if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), fmt.Sprintf("config: %d bytes", size)) || !strings.Contains(err.Error(), "65536") {
			t.Errorf("Set of %d bytes: got %v, want InvalidArgument naming config, its size and the limit", size, err)
		}
	}
	if files := h.networkFiles(); len(files) != 0 {
		t.Errorf("refused networks written: %v", files)
	}
	h.mustSet(sizedNetwork(t, "largest", crinet.MaxNetworkBytes))

	// Fill the store to the total limit with networks of the largest size.
	fit := crinet.MaxTotalBytes / crinet.MaxNetworkBytes
	for i := 1; i < fit; i++ {
		h.mustSet(sizedNetwork(t, fmt.Sprintf("net-%d", i), crinet.MaxNetworkBytes))
	}
	_, err := h.set(sriovNetwork("cnf", "one-too-many"))
	if code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "config:") || !strings.Contains(err.Error(), fmt.Sprint(crinet.MaxTotalBytes)) {
		t.Errorf("Set past the total: got %v, want ResourceExhausted naming config and the limit", err)
	}
	if files := h.networkFiles(); len(files) != fit {
		t.Errorf("%d network files, want the %d that fit", len(files), fit)
	}
	// Replacing a network counts its new size, not both.
	h.mustSet(sizedNetwork(t, "largest", crinet.MaxNetworkBytes-10))
	for range 2 {
		if got := len(h.list()); got != fit+1 {
			t.Errorf("List: %d networks, want _fallback and %d", got, fit)
		}
		h.client = h.dial()
	}
	// A file written before the limits, or copied in, that does not fit is
	// left out at start, named; the rest is served.
	h.stop()
	h.stop = nil
	extra := sizedNetwork(t, "zz", crinet.MaxNetworkBytes)
	extra.Metadata.Uid, extra.Metadata.Generation = "copied", 1
	data, err := networkfile.Encode(extra)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "networks", "cnf_zz.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	store, err := crinet.OpenStore(filepath.Join(h.dir, "networks"), crinet.Validator{BinDirs: []string{h.bin}})
	if err == nil || !strings.Contains(err.Error(), "cnf_zz.json") || !strings.Contains(err.Error(), fmt.Sprint(crinet.MaxTotalBytes)) {
		t.Errorf("OpenStore with a file past the total: %v, want it named with the limit", err)
	}
	if got := len(store.List()); got != fit {
		t.Errorf("OpenStore loaded %d networks, want the %d that fit", got, fit)
	}
}

package dra_test

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/hwnet-io/hwnet/dra"
	"github.com/hwnet-io/hwnet/internal/metrics"
)

// series is one result's series of a histogram as /metrics serves it.
type series struct {
	count int
	sum   float64
}

// scrapeClaims reads the claims hwnet_dra_<call>_duration_seconds counted,
// by result, through the agent's registry's handler.
func scrapeClaims(t *testing.T, m *metrics.Metrics, call string) map[string]series {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler(false).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", rec.Code)
	}
	out := map[string]series{}
	prefix := "hwnet_dra_" + call + "_duration_seconds_"
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		// count{result="error"} 1, sum{result="error"} 0.0021
		kind, rest, _ := strings.Cut(rest, `{result="`)
		result, value, _ := strings.Cut(rest, `"} `)
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s: %v", sc.Text(), err)
		}
		s := out[result]
		switch kind {
		case "count":
			s.count = int(v)
		case "sum":
			s.sum = v
		}
		out[result] = s
	}
	return out
}

// checkClaims checks how many claims each result counted, and that each
// counted took some time.
func checkClaims(t *testing.T, got map[string]series, call string, success, failed int) {
	t.Helper()
	for result, want := range map[string]int{"success": success, "error": failed} {
		s := got[result]
		if s.count != want {
			t.Errorf("hwnet_dra_%s_duration_seconds_count{result=%q} = %d, want %d", call, result, s.count, want)
		}
		if s.count > 0 && s.sum <= 0 {
			t.Errorf("hwnet_dra_%s_duration_seconds_sum{result=%q} = %g for %d claims", call, result, s.sum, s.count)
		}
	}
}

// newMeasuredPreparer is a preparer that records into a registry of its
// own, with the test node's devices published.
func newMeasuredPreparer(t *testing.T, n *testNode) (*preparer, *metrics.Metrics) {
	t.Helper()
	m := metrics.New()
	opts := preparerOptions(n, t.TempDir())
	opts.Metrics = m
	p := newPreparerWith(t, n, opts)
	if err := p.drv.SetDevices(dra.Node{Inventory: n.inv, SysfsRoot: n.node.SysRoot()}, n.pools); err != nil {
		t.Fatal(err)
	}
	return p, m
}

// tearCheckpoint leaves a checkpoint no call can read.
func (p *preparer) tearCheckpoint(t *testing.T) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(p.opts.PluginDir, "checkpoint.json"), []byte(`{"version":3,`), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestPrepareMetrics: each claim kubelet asks the driver to prepare is
// one observation of hwnet_dra_prepare_duration_seconds, by its own
// result: a claim prepared, or answered from the checkpoint, is a
// success; one refused an error, whatever the other claims of its call;
// a call that fails as a whole (the checkpoint cannot be read) fails each
// of its claims.
func TestPrepareMetrics(t *testing.T) {
	n := newTestNode(t)
	const vf = "pci-0000-3b-01-6"
	unallocated := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim-u", UID: "u"}}
	tests := []struct {
		name             string
		torn             bool
		calls            [][]*resourceapi.ResourceClaim
		success, failure int
	}{
		{"prepared", false, [][]*resourceapi.ResourceClaim{{claim("a", alloc("r", vf))}}, 1, 0},
		{"prepared, then answered from the checkpoint", false,
			[][]*resourceapi.ResourceClaim{{claim("a", alloc("r", vf))}, {claim("a", alloc("r", vf))}}, 2, 0},
		{"not allocated", false, [][]*resourceapi.ResourceClaim{{unallocated}}, 0, 1},
		{"one claim of two refused: its device is the other's", false,
			[][]*resourceapi.ResourceClaim{{claim("a", alloc("r", vf)), claim("b", alloc("r", vf))}}, 1, 1},
		{"checkpoint unreadable: the call fails", true,
			[][]*resourceapi.ResourceClaim{{claim("a", alloc("r", vf)), claim("c", alloc("r", "pci-0000-3e-01-6"))}}, 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, m := newMeasuredPreparer(t, n)
			if tt.torn {
				p.tearCheckpoint(t)
			}
			for _, claims := range tt.calls {
				res, err := p.drv.PrepareResourceClaims(context.Background(), claims)
				if (err != nil) != tt.torn {
					t.Fatalf("prepare: %v", err)
				}
				for uid, r := range res {
					t.Logf("claim %s: %v", uid, r.Err)
				}
			}
			checkClaims(t, scrapeClaims(t, m, "prepare"), "prepare", tt.success, tt.failure)
			checkClaims(t, scrapeClaims(t, m, "unprepare"), "unprepare", 0, 0)
		})
	}
}

// TestUnprepareMetrics: each claim kubelet asks the driver to unprepare
// is one observation of hwnet_dra_unprepare_duration_seconds, by its own
// result: a claim unprepared, or one the checkpoint does not hold, is a
// success; one whose CDI spec cannot be removed an error; a call that
// fails as a whole fails each of its claims.
func TestUnprepareMetrics(t *testing.T) {
	n := newTestNode(t)
	const vf = "pci-0000-3b-01-6"
	tests := []struct {
		name             string
		prepared         []string // UIDs prepared before, each with its own VF
		stuck            string   // a UID whose CDI spec cannot be removed
		torn             bool
		unprepare        []string
		success, failure int
	}{
		{"unprepared", []string{"a"}, "", false, []string{"a"}, 1, 0},
		{"never prepared here", nil, "", false, []string{"x"}, 1, 0},
		{"CDI spec cannot be removed", nil, "x", false, []string{"x"}, 0, 1},
		{"one claim of two fails", []string{"a"}, "x", false, []string{"a", "x"}, 1, 1},
		{"checkpoint unreadable: the call fails", []string{"a"}, "", true, []string{"a", "x"}, 0, 2},
	}
	vfs := []string{vf, "pci-0000-3e-01-6"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, m := newMeasuredPreparer(t, n)
			for i, uid := range tt.prepared {
				if res := p.prepare(t, claim(uid, alloc("r", vfs[i]))); res.Err != nil {
					t.Fatal(res.Err)
				}
			}
			if tt.stuck != "" {
				// A directory with something in it where the claim's
				// spec would be: its removal fails, not as "not there".
				spec := filepath.Join(p.opts.CDIDir, dra.DefaultDriverName+"-"+tt.stuck+".json")
				if err := os.MkdirAll(filepath.Join(spec, "in-the-way"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tt.torn {
				p.tearCheckpoint(t)
			}
			objs := make([]kubeletplugin.NamespacedObject, len(tt.unprepare))
			for i, uid := range tt.unprepare {
				objs[i] = kubeletplugin.NamespacedObject{UID: types.UID(uid), NamespacedName: types.NamespacedName{Namespace: "ns", Name: "claim-" + uid}}
			}
			res, err := p.drv.UnprepareResourceClaims(context.Background(), objs)
			if (err != nil) != tt.torn {
				t.Fatalf("unprepare: %v", err)
			}
			for uid, err := range res {
				t.Logf("claim %s: %v", uid, err)
			}
			checkClaims(t, scrapeClaims(t, m, "unprepare"), "unprepare", tt.success, tt.failure)
		})
	}
}

package metrics

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

func scrape(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(body)
}

// TestScrape: what an operator's dashboards read, by name and label, in
// the Prometheus text format.
func TestScrape(t *testing.T) {
	m := New()
	m.ObserveCNI("ADD", 20*time.Millisecond, nil)
	m.ObserveCNI("ADD", time.Second, fmt.Errorf("pod x: %w", types.NewError(types.ErrTryAgainLater, "no device yet", "")))
	m.ObserveCNI("DEL", time.Millisecond, errors.New("plain"))
	m.SetPool("intel.com/sriov", 8, 3)
	m.SetPoolFenced("intel.com/sriov", 2)
	m.SetPool("intel.com/gone", 1, 0)
	m.SetPoolFenced("intel.com/gone", 1)
	m.DeletePool("intel.com/gone")
	m.ObserveDiscovery(30 * time.Millisecond)
	m.ObserveRefresh(time.Millisecond)
	m.PodResourcesRequest(nil)
	m.PodResourcesRequest(errors.New("kubelet down"))
	m.RefusedConnection("cni")
	m.ObserveDRAPrepare(3*time.Millisecond, nil)
	m.ObserveDRAPrepare(12*time.Second, errors.New("rebind timed out"))
	m.ObserveDRAUnprepare(time.Millisecond, nil)
	m.SetConfigServed("0bad")
	m.SetConfigServed("c0ffee")
	code, body := scrape(t, m.Handler(false), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{
		`hwnet_cni_request_duration_seconds_count{command="ADD",result="success"} 1`,
		`hwnet_cni_request_duration_seconds_count{command="ADD",result="error"} 1`,
		`hwnet_cni_request_duration_seconds_count{command="DEL",result="error"} 1`,
		`hwnet_cni_attach_failures_total{reason="try_again_later"} 1`,
		`hwnet_pool_capacity_devices{resource="intel.com/sriov"} 8`,
		`hwnet_pool_allocatable_devices{resource="intel.com/sriov"} 5`,
		`hwnet_pool_unhealthy_devices{resource="intel.com/sriov"} 3`,
		`hwnet_pool_fenced_devices{resource="intel.com/sriov"} 2`,
		`hwnet_dra_prepare_duration_seconds_count{result="success"} 1`,
		`hwnet_dra_prepare_duration_seconds_count{result="error"} 1`,
		// The buckets tell a claim answered in a millisecond from one in
		// half of it, and a prepare that waited 10 s for a rebind and more
		// from one that waited 8 s.
		`hwnet_dra_prepare_duration_seconds_bucket{result="error",le="8.192"} 0`,
		`hwnet_dra_prepare_duration_seconds_bucket{result="error",le="16.384"} 1`,
		`hwnet_dra_prepare_duration_seconds_bucket{result="success",le="0.004"} 1`,
		`hwnet_dra_unprepare_duration_seconds_count{result="success"} 1`,
		`hwnet_dra_unprepare_duration_seconds_bucket{result="success",le="0.0005"} 0`,
		`hwnet_dra_unprepare_duration_seconds_bucket{result="success",le="0.001"} 1`,
		`hwnet_discovery_duration_seconds_count 1`,
		`hwnet_health_refresh_duration_seconds_count 1`,
		`hwnet_podresources_requests_total{result="success"} 1`,
		`hwnet_podresources_requests_total{result="error"} 1`,
		`hwnet_socket_refused_connections_total{socket="cni"} 1`,
		`hwnet_config_info{sha256="c0ffee"} 1`,
		`hwnet_build_info{`,
		`go_goroutines `,
		`process_start_time_seconds `,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, unwanted := range []string{`intel.com/gone`, `reason="internal"`, `0bad`} {
		if strings.Contains(body, unwanted) {
			t.Errorf("/metrics has %s: a deleted pool, a DEL counted as an attach failure, or a configuration no longer served", unwanted)
		}
	}
}

// TestGather: Gather gives hwnet's own families and leaves out the Go
// runtime's and the process's, which /metrics serves beside them.
func TestGather(t *testing.T) {
	m := New()
	m.SetLedgerUnknown(2)
	families, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(families))
	for _, f := range families {
		names = append(names, f.GetName())
	}
	if !slices.Contains(names, "hwnet_ledger_unknown_sources") || !slices.Contains(names, "hwnet_build_info") {
		t.Errorf("Gather gave %q, without hwnet's own families", names)
	}
	if i := slices.IndexFunc(names, func(n string) bool { return !strings.HasPrefix(n, "hwnet_") }); i >= 0 {
		t.Errorf("Gather gave %s, not one of hwnet's", names[i])
	}
}

func TestReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{types.NewError(types.ErrInvalidNetworkConfig, "bad", ""), "invalid_network_config"},
		{fmt.Errorf("wrapped: %w", types.NewError(types.ErrUnknownContainer, "x", "")), "unknown_container"},
		{types.NewError(107, "plugin's own", ""), "code_107"},
		{errors.New("not a CNI error"), "internal"},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestPprofOptIn: profiles reveal memory and command lines, so they are
// served only when asked for.
func TestPprofOptIn(t *testing.T) {
	m := New()
	if code, _ := scrape(t, m.Handler(false), "/debug/pprof/"); code != http.StatusNotFound {
		t.Errorf("pprof off: /debug/pprof/ answered %d, want 404", code)
	}
	if code, _ := scrape(t, m.Handler(true), "/debug/pprof/"); code != http.StatusOK {
		t.Errorf("pprof on: /debug/pprof/ answered %d, want 200", code)
	}
}

func TestWrapTransportCountsAPIRequests(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	m := New()
	client := &http.Client{Transport: m.WrapTransport(http.DefaultTransport)}
	for _, p := range []string{"/ok", "/ok", "/missing"} {
		resp, err := client.Get(srv.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	_, body := scrape(t, m.Handler(false), "/metrics")
	for _, want := range []string{`hwnet_api_requests_total{code="200",method="get"} 2`, `hwnet_api_requests_total{code="404",method="get"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestNilRecordsNothing(t *testing.T) {
	var m *Metrics
	m.ObserveCNI("ADD", time.Second, errors.New("x"))
	m.SetPool("a/b", 1, 1)
	m.SetPoolFenced("a/b", 1)
	m.DeletePool("a/b")
	m.ObserveDRAPrepare(time.Second, nil)
	m.ObserveDRAUnprepare(time.Second, errors.New("x"))
	m.ObserveDiscovery(time.Second)
	m.ObserveRefresh(time.Second)
	m.PodResourcesRequest(nil)
	m.SetConfigServed("c0ffee")
	if rt := m.WrapTransport(http.DefaultTransport); rt != http.DefaultTransport {
		t.Error("a nil Metrics wrapped the transport")
	}
}

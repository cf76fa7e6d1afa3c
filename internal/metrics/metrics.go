// Package metrics is hwnet-agent's Prometheus instrumentation: CNI request
// latency, attach failures, pool sizes, discovery and refresh durations,
// kubelet PodResources and API server requests, connections its node
// sockets refused, the pool configuration served and whether it was kept
// for the next start, declarative VF changes, the DRA driver's prepare
// and unprepare latency, and build information, on registries of its own
// (hwnet's, and the Go runtime's and the process's) served together by
// Handler.
package metrics

import (
	"cmp"
	"errors"
	"net/http"
	"net/http/pprof"
	"strconv"
	"sync"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/hwnet-io/hwnet/internal/version"
)

const namespace = "hwnet"

// Metrics holds the agent's collectors. Its methods are safe for
// concurrent use; a nil *Metrics records nothing.
type Metrics struct {
	// reg holds hwnet's own collectors, runtime the Go runtime's and
	// the process's, whose collection reads /proc: Gather leaves it out.
	reg                  *prometheus.Registry
	runtime              *prometheus.Registry
	cniDuration          *prometheus.HistogramVec
	attachFailures       *prometheus.CounterVec
	poolCapacity         *prometheus.GaugeVec
	poolAllocatable      *prometheus.GaugeVec
	poolUnhealthy        *prometheus.GaugeVec
	poolFenced           *prometheus.GaugeVec
	poolHeld             *prometheus.GaugeVec
	discoveryDuration    prometheus.Histogram
	refreshDuration      prometheus.Histogram
	podResourcesRequests *prometheus.CounterVec
	apiRequests          *prometheus.CounterVec
	socketRefused        *prometheus.CounterVec
	lastGoodUnkept       prometheus.Gauge
	configServed         *prometheus.GaugeVec
	vfLayout             vfLayoutMetrics
	ledger               ledgerMetrics
	dra                  draMetrics
	// servedMu guards served, configServed's label now: a scrape between
	// a reload's two writes sees the old configuration or the new one,
	// never none.
	servedMu sync.Mutex
	served   string
}

// CNI requests take from a millisecond (DEL of nothing) to tens of
// seconds (a delegate waiting for a device); the default buckets stop at 10 s.
var cniBuckets = prometheus.ExponentialBuckets(0.001, 2.5, 13)

// New registers hwnet's collectors, the Go runtime's and the process's.
func New() *Metrics {
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		runtime: prometheus.NewRegistry(),
		cniDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "cni",
			Name: "request_duration_seconds", Help: "CNI requests (ADD, DEL, CHECK, ...) by command and result, as the agent served them.",
			Buckets: cniBuckets}, []string{"command", "result"}),
		attachFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "cni",
			Name: "attach_failures_total", Help: "Failed CNI ADDs by reason: the CNI error code's name."}, []string{"reason"}),
		poolCapacity: poolGauge("capacity",
			"Devices the pool lists to kubelet (a device plugin) or publishes in the ResourceSlices (DRA), offered or not."),
		poolAllocatable: poolGauge("allocatable", "Devices of the pool offered: kubelet may allocate them, or the scheduler give them to a claim."),
		poolUnhealthy: poolGauge("unhealthy",
			"Devices of the pool not offered: listed unhealthy to kubelet or tainted in the ResourceSlices (unhealthy, held outside the pool's front end, fenced, holders unknown)."),
		poolFenced: poolGauge("fenced",
			"Devices of the pool a fence withdraws (its PF's VF layout is changing, the pool is switching front end, a VF settings reset is pending); they count as unhealthy too."),
		poolHeld: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "pool", Name: "held_devices",
			Help: "Devices of the pool by what holds them (the device ledger): pod (a device plugin allocation), claim (a DRA claim), container (a CNI attachment alone), none."},
			[]string{"resource", "holder"}),
		discoveryDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "discovery_duration_seconds",
			Help: "Full discoveries of the node's NICs.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		refreshDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "health_refresh_duration_seconds",
			Help: "Health refreshes of every pool after link events.", Buckets: prometheus.ExponentialBuckets(0.0001, 2, 14)}),
		podResourcesRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "podresources_requests_total",
			Help: "Requests to kubelet's PodResources API by result."}, []string{"result"}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "api_requests_total",
			Help: "Requests to the Kubernetes API server by method and HTTP status code."}, []string{"method", "code"}),
		socketRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "socket",
			Name: "refused_connections_total", Help: "Connections to the agent's node sockets refused by the peer's credentials, by socket."},
			[]string{"socket"}),
		lastGoodUnkept: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "config", Name: "last_good_unkept",
			Help: "1 when the pool configuration served could not be kept as the last good copy (--last-good-config) for the next start, else 0."}),
		configServed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "config", Name: "info",
			Help: "The pool configuration served, by the SHA-256 of its file as sha256sum prints it (the last good copy's while a file is rejected); always 1."},
			[]string{"sha256"}),
		vfLayout: newVFLayoutMetrics(),
		ledger:   newLedgerMetrics(),
		dra:      newDRAMetrics(),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help: "The running hwnet release; always 1."}, []string{"version", "revision", "goversion"})
	v := version.Get()
	buildInfo.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	m.reg.MustRegister(m.cniDuration, m.attachFailures, m.poolCapacity, m.poolAllocatable, m.poolUnhealthy, m.poolFenced, m.poolHeld,
		m.discoveryDuration, m.refreshDuration, m.podResourcesRequests, m.apiRequests, m.socketRefused, m.lastGoodUnkept, m.configServed, buildInfo)
	m.runtime.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m.reg.MustRegister(m.vfLayout.collectors()...)
	m.reg.MustRegister(m.ledger.collectors()...)
	m.reg.MustRegister(m.dra.collectors()...)
	return m
}

func poolGauge(name, help string) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "pool", Name: name + "_devices",
		Help: help}, []string{"resource"})
}

// Handler serves /metrics and, when pprof is set, Go's profiles under
// /debug/pprof/.
func (m *Metrics) Handler(withPprof bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(prometheus.Gatherers{m.reg, m.runtime}, promhttp.HandlerOpts{}))
	if withPprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// Gather returns hwnet's own metric families, without the Go runtime's
// and the process's: an in-process reader that polls (the hand-out soak,
// every few milliseconds) does not read /proc each time.
func (m *Metrics) Gather() ([]*dto.MetricFamily, error) { return m.reg.Gather() }

// ObserveCNI records one CNI request; a failed ADD also counts as an
// attach failure by its CNI error code.
func (m *Metrics) ObserveCNI(command string, took time.Duration, err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
		if command == "ADD" {
			m.attachFailures.WithLabelValues(Reason(err)).Inc()
		}
	}
	m.cniDuration.WithLabelValues(command, result).Observe(took.Seconds())
}

// Reason names a CNI error by its code (CNI spec, "Error"), which keeps
// the label's values few whatever the messages say.
func Reason(err error) string {
	var cniErr *types.Error
	if !errors.As(err, &cniErr) {
		return "internal"
	}
	switch cniErr.Code {
	case types.ErrUnknown:
		return "unknown"
	case types.ErrIncompatibleCNIVersion:
		return "incompatible_cni_version"
	case types.ErrUnsupportedField:
		return "unsupported_field"
	case types.ErrUnknownContainer:
		return "unknown_container"
	case types.ErrInvalidEnvironmentVariables:
		return "invalid_environment"
	case types.ErrIOFailure:
		return "io_failure"
	case types.ErrDecodingFailure:
		return "decoding_failure"
	case types.ErrInvalidNetworkConfig:
		return "invalid_network_config"
	case types.ErrTryAgainLater:
		return "try_again_later"
	case types.ErrInternal:
		return "internal"
	}
	return "code_" + strconv.FormatUint(uint64(cniErr.Code), 10)
}

// SetPool records a pool's listed and unhealthy devices.
func (m *Metrics) SetPool(resource string, listed, unhealthy int) {
	if m == nil {
		return
	}
	m.poolCapacity.WithLabelValues(resource).Set(float64(listed))
	m.poolAllocatable.WithLabelValues(resource).Set(float64(listed - unhealthy))
	m.poolUnhealthy.WithLabelValues(resource).Set(float64(unhealthy))
}

// SetPoolFenced records how many of the pool's devices a fence withdraws.
func (m *Metrics) SetPoolFenced(resource string, fenced int) {
	if m != nil {
		m.poolFenced.WithLabelValues(resource).Set(float64(fenced))
	}
}

// SetPoolHolders records how many of the pool's devices each kind of
// holder holds, "none" for the free ones.
func (m *Metrics) SetPoolHolders(resource string, byHolder map[string]int) {
	if m == nil {
		return
	}
	for holder, n := range byHolder {
		m.poolHeld.WithLabelValues(resource, cmp.Or(holder, "none")).Set(float64(n))
	}
}

// DeletePool forgets a pool the configuration no longer has.
func (m *Metrics) DeletePool(resource string) {
	if m == nil {
		return
	}
	for _, g := range []*prometheus.GaugeVec{m.poolCapacity, m.poolAllocatable, m.poolUnhealthy, m.poolFenced} {
		g.DeleteLabelValues(resource)
	}
	m.poolHeld.DeletePartialMatch(prometheus.Labels{"resource": resource})
}

// ObserveDiscovery records one full discovery.
func (m *Metrics) ObserveDiscovery(took time.Duration) {
	if m != nil {
		m.discoveryDuration.Observe(took.Seconds())
	}
}

// ObserveRefresh records one health refresh of every pool.
func (m *Metrics) ObserveRefresh(took time.Duration) {
	if m != nil {
		m.refreshDuration.Observe(took.Seconds())
	}
}

// PodResourcesRequest counts one request to kubelet's PodResources API.
func (m *Metrics) PodResourcesRequest(err error) {
	if m == nil {
		return
	}
	result := "success"
	if err != nil {
		result = "error"
	}
	m.podResourcesRequests.WithLabelValues(result).Inc()
}

// SetLastGoodUnkept records whether the configuration served failed to be
// kept as the last good copy.
func (m *Metrics) SetLastGoodUnkept(unkept bool) {
	if m == nil {
		return
	}
	v := 0.0
	if unkept {
		v = 1
	}
	m.lastGoodUnkept.Set(v)
}

// SetConfigServed names the pool configuration served by its SHA-256,
// in place of the one before.
func (m *Metrics) SetConfigServed(sha256 string) {
	if m == nil {
		return
	}
	m.servedMu.Lock()
	defer m.servedMu.Unlock()
	m.configServed.WithLabelValues(sha256).Set(1)
	if m.served != "" && m.served != sha256 {
		m.configServed.DeleteLabelValues(m.served)
	}
	m.served = sha256
}

// RefusedConnection counts a connection to a node socket ("cni",
// "cri-network") refused by its peer's credentials.
func (m *Metrics) RefusedConnection(socket string) {
	if m != nil {
		m.socketRefused.WithLabelValues(socket).Inc()
	}
}

// WrapTransport counts the requests a client-go transport sends; it fits
// rest.Config.WrapTransport.
func (m *Metrics) WrapTransport(rt http.RoundTripper) http.RoundTripper {
	if m == nil {
		return rt
	}
	return promhttp.InstrumentRoundTripperCounter(m.apiRequests, rt)
}

package metrics

import "github.com/prometheus/client_golang/prometheus"

// ledgerMetrics follow the device ledger, the one path a device takes to
// change hands: sources it cannot read (it then hands nothing out),
// refused hand-outs, fences in force.
type ledgerMetrics struct {
	unknown  prometheus.Gauge
	refusals *prometheus.CounterVec
	fences   prometheus.Gauge
}

func newLedgerMetrics() ledgerMetrics {
	return ledgerMetrics{
		unknown: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "ledger", Name: "unknown_sources",
			Help: "Sources of device holders the ledger cannot read now (kubelet PodResources, a DRA checkpoint, the CNI records); while it is not 0 no device is handed out or offered."}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "ledger", Name: "refusals_total",
			Help: "Hand-outs (Allocate, DRA prepare, CNI ADD, a VF layout's fence) the ledger refused, by reason: held, fenced, unknown, unhealthy."},
			[]string{"reason"}),
		fences: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "ledger", Name: "fences",
			Help: "Fences in force: PFs whose VF layout is changing, pools switching front end."}),
	}
}

func (l ledgerMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{l.unknown, l.refusals, l.fences}
}

// SetLedgerUnknown records how many sources the ledger cannot read.
func (m *Metrics) SetLedgerUnknown(n int) {
	if m != nil {
		m.ledger.unknown.Set(float64(n))
	}
}

// LedgerRefused counts one refused hand-out.
func (m *Metrics) LedgerRefused(reason string) {
	if m != nil {
		m.ledger.refusals.WithLabelValues(reason).Inc()
	}
}

// SetLedgerFences records how many fences are in force.
func (m *Metrics) SetLedgerFences(n int) {
	if m != nil {
		m.ledger.fences.Set(float64(n))
	}
}

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// vfLayoutMetrics follow hwnet's declarative VFs (vfLayouts): the PFs
// waiting for their VFs to be free, and the changes made.
type vfLayoutMetrics struct {
	waiting  *prometheus.GaugeVec
	changes  *prometheus.CounterVec
	duration prometheus.Histogram
}

func newVFLayoutMetrics() vfLayoutMetrics {
	return vfLayoutMetrics{
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: "vf_layout", Name: "waiting",
			Help: "1 while the PF's declared VF layout waits for a holder of one of its VFs (the device ledger) to let go, else 0."},
			[]string{"pf"}),
		changes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: "vf_layout", Name: "changes_total",
			Help: "Changes of a PF's VFs to its declared layout, by result: applied, rolled_back (failed, the last layout restored), rollback_failed."},
			[]string{"pf", "result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "vf_layout", Name: "change_duration_seconds",
			Help: "Changes of a PF's VFs to its declared layout, rollback included.", Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
	}
}

func (v vfLayoutMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{v.waiting, v.changes, v.duration}
}

// SetVFLayoutWaiting records whether the PF's layout waits for its VFs.
func (m *Metrics) SetVFLayoutWaiting(pf string, waiting bool) {
	if m == nil {
		return
	}
	v := 0.0
	if waiting {
		v = 1
	}
	m.vfLayout.waiting.WithLabelValues(pf).Set(v)
}

// ObserveVFLayoutChange records one change of a PF's VFs and its result.
func (m *Metrics) ObserveVFLayoutChange(pf, result string, took time.Duration) {
	if m == nil {
		return
	}
	m.vfLayout.changes.WithLabelValues(pf, result).Inc()
	m.vfLayout.duration.Observe(took.Seconds())
}

package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// draMetrics follow the DRA driver's answers to kubelet, one observation
// per claim. A histogram's _count already counts the claims by result: no
// counter twin.
type draMetrics struct {
	prepare   *prometheus.HistogramVec
	unprepare *prometheus.HistogramVec
}

// draBuckets resolve 0.5 ms (a claim answered from the checkpoint) to
// 32.8 s: a claim whose VF is rebound to another driver waits up to 10 s
// for the unbind and again for the bind, at prepare and at unprepare.
var draBuckets = prometheus.ExponentialBuckets(0.0005, 2, 17)

func newDRAMetrics() draMetrics {
	return draMetrics{
		prepare: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "dra", Name: "prepare_duration_seconds",
			Help:    "Claims the DRA driver prepared for kubelet (NodePrepareResources), by result: the claim's own work and its call's checkpoint read and save.",
			Buckets: draBuckets}, []string{"result"}),
		unprepare: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Subsystem: "dra", Name: "unprepare_duration_seconds",
			Help:    "Claims the DRA driver unprepared for kubelet (NodeUnprepareResources), by result: the claim's own work and its call's checkpoint read and save.",
			Buckets: draBuckets}, []string{"result"}),
	}
}

func (d draMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{d.prepare, d.unprepare}
}

// ObserveDRAPrepare records one claim's prepare and its result.
func (m *Metrics) ObserveDRAPrepare(took time.Duration, err error) {
	if m != nil {
		m.dra.prepare.WithLabelValues(result(err)).Observe(took.Seconds())
	}
}

// ObserveDRAUnprepare records one claim's unprepare and its result.
func (m *Metrics) ObserveDRAUnprepare(took time.Duration, err error) {
	if m != nil {
		m.dra.unprepare.WithLabelValues(result(err)).Observe(took.Seconds())
	}
}

// result is the result label's value: success or error, as the CNI
// requests' and PodResources requests' say.
func result(err error) string {
	if err != nil {
		return "error"
	}
	return "success"
}

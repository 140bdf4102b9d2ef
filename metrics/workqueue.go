package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics implements client-go's workqueue.MetricsProvider with Prometheus vectors
// labelled by queue name, under the names client-go's own metrics use elsewhere
// (workqueue_depth, workqueue_adds_total, ...), so existing dashboards apply.
type queueMetrics struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, work              *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = (*queueMetrics)(nil)

func newQueueMetrics() *queueMetrics {
	buckets := prometheus.ExponentialBuckets(1e-6, 10, 10) // 1µs to about 3h
	name := []string{"name"}
	return &queueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of the workqueue."}, name),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "adds_total",
			Help: "Adds handled by the workqueue."}, name),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help: "How long an item waits in the workqueue before it is taken.", Buckets: buckets}, name),
		work: prometheus.NewHistogramVec(prometheus.HistogramOpts{Subsystem: "workqueue", Name: "work_duration_seconds",
			Help: "How long processing an item takes.", Buckets: buckets}, name),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "Seconds of work in progress not yet observed by work_duration; large values mean stuck workers."}, name),
		longest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "Seconds the longest-running item has been in progress."}, name),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Subsystem: "workqueue", Name: "retries_total",
			Help: "Retries (rate-limited re-adds) handled by the workqueue."}, name),
	}
}

func (q *queueMetrics) register(r prometheus.Registerer) {
	r.MustRegister(q.depth, q.adds, q.latency, q.work, q.unfinished, q.longest, q.retries)
}

func (q *queueMetrics) NewDepthMetric(n string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(n)
}
func (q *queueMetrics) NewAddsMetric(n string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(n)
}
func (q *queueMetrics) NewLatencyMetric(n string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(n)
}
func (q *queueMetrics) NewWorkDurationMetric(n string) workqueue.HistogramMetric {
	return q.work.WithLabelValues(n)
}
func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(n)
}
func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(n string) workqueue.SettableGaugeMetric {
	return q.longest.WithLabelValues(n)
}
func (q *queueMetrics) NewRetriesMetric(n string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(n)
}

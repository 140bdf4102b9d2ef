// Package metrics exposes vm-controller's Prometheus metrics: the client-go workqueue's own
// metrics and API request counts (through the hooks client-go provides for them),
// reconciles by result and duration, VMs by phase and by reason, and whether this replica
// leads.
//
// client-go's hooks are process-wide and take the first provider registered, so a process
// builds one Metrics, before it builds any workqueue or client.
package metrics

import (
	"context"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/tools/cache"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"

	"net/http"

	"github.com/cloudnative-czs/vm-controller/reconcile"
)

// Namespace prefixes the controller's own metrics.
const Namespace = "vmcontroller"

// Metrics holds the registry and the controller's own collectors.
type Metrics struct {
	registry          *prometheus.Registry
	reconciles        *prometheus.CounterVec
	reconcileDuration *prometheus.HistogramVec
	leader            prometheus.Gauge
	served            prometheus.Gauge
	reconcileTimeout  prometheus.Gauge
	cpuUsage          *prometheus.GaugeVec
	memoryUsage       *prometheus.GaugeVec
	passesToActive    prometheus.Histogram
	fencedWrites      prometheus.Counter
}

var hooks sync.Once

// reconcileBuckets are the bounds of vmcontroller_reconcile_duration_seconds: 0.5 ms to
// 65.536 s, past the default --reconcile-timeout (1m), at which a reconcile is cut off. With
// 16 they ended at 16.384 s: every slower reconcile fell in +Inf, and histogram_quantile
// (VMControllerReconcileSlow, the dashboard) read 16.38 s for reconciles of a minute.
var reconcileBuckets = prometheus.ExponentialBuckets(0.0005, 2, 18)

// New registers every collector on a new registry and installs the workqueue and REST client
// hooks. Call it once per process, before any workqueue or client exists.
func New() *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		registry: reg,
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: Namespace, Name: "reconcile_total",
			Help: "Reconciles by result: success, requeue (success, look again later), conflict (decided on a stale object; retried), error (retried with backoff), timeout (cut off at --reconcile-timeout; retried with backoff), panic (recovered; retried with backoff), fenced (this replica's Lease was not renewed in time: nothing more written; looked at again shortly)."},
			[]string{"result"}),
		reconcileDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: Namespace, Name: "reconcile_duration_seconds",
			Help: "Time to gather, decide and apply one VM, by result.", Buckets: reconcileBuckets},
			[]string{"result"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "leader",
			Help: "1 while this replica holds the leader Lease (or runs without leader election), 0 otherwise."}),
		served: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "resource_served",
			Help: "1 while the API server serves the VM resource (its CRD exists, serves the version and is established), 0 otherwise."}),
		reconcileTimeout: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: Namespace, Name: "reconcile_timeout_seconds",
			Help: "The longest a reconcile may take (--reconcile-timeout), in seconds, for alerts on workers held past it."}),
	}
	vm := []string{"namespace", "name"}
	m.cpuUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "vm_cpu_usage_cores",
		Help: "CPU a VM's server uses, in cores, as last sampled from the metrics API."}, vm)
	m.memoryUsage = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: Namespace, Name: "vm_memory_usage_bytes",
		Help: "Memory a VM's server uses, in bytes, as last sampled from the metrics API."}, vm)
	m.passesToActive = prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: Namespace, Name: "reconcile_passes_to_active",
		Help:    "Reconciles a VM took through the queue, from its first to the one that made it Active. The wait of each in the queue is workqueue_queue_duration_seconds{name=\"virtualmachines\"}.",
		Buckets: []float64{1, 2, 3, 4, 5, 6, 8, 10, 15, 20}})
	m.fencedWrites = prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Name: "fenced_writes_total",
		Help: "API writes refused before they left the process because this replica's last renewal of the leader Lease was older than --renew-deadline: it may have been paused while another replica took over."})
	m.served.Set(1)
	// Every result's series exists from the start, at 0: a series born at 1 on the first
	// panic (or timeout, or error) shows Prometheus' increase() and rate() no change, so
	// the alert on it would miss it.
	for _, result := range reconcile.Results {
		m.reconciles.WithLabelValues(result)
		m.reconcileDuration.WithLabelValues(result)
	}
	reg.MustRegister(m.reconciles, m.reconcileDuration, m.leader, m.served, m.reconcileTimeout, m.cpuUsage, m.memoryUsage, m.passesToActive, m.fencedWrites,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	q := newQueueMetrics()
	q.register(reg)
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rest_client_requests_total",
		Help: "API requests by HTTP status code, method and host."}, []string{"code", "method", "host"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "rest_client_request_duration_seconds",
		Help: "API request latency by verb and host.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}, []string{"verb", "host"})
	reg.MustRegister(requests, latency)
	hooks.Do(func() {
		workqueue.SetProvider(q)
		clientmetrics.Register(clientmetrics.RegisterOpts{
			RequestResult:  requestResult{requests},
			RequestLatency: requestLatency{latency},
		})
	})
	return m
}

// PassesToActive records how many reconciles a VM took to become Active.
func (m *Metrics) PassesToActive(passes int) { m.passesToActive.Observe(float64(passes)) }

// Reconciled records one reconcile.
func (m *Metrics) Reconciled(result string, took time.Duration) {
	m.reconciles.WithLabelValues(result).Inc()
	m.reconcileDuration.WithLabelValues(result).Observe(took.Seconds())
}

// FencedWrite counts one write refused by the leader fence. A leader that counts them has
// been paused or cut off from the API server for about the Lease's length: writes it decided
// on before were kept from overwriting the next leader's.
func (m *Metrics) FencedWrite() { m.fencedWrites.Inc() }

// SetLeader records whether this replica leads.
func (m *Metrics) SetLeader(leading bool) {
	v := 0.0
	if leading {
		v = 1
	}
	m.leader.Set(v)
}

// UsageSampled records a VM's usage.
func (m *Metrics) UsageSampled(vm cache.ObjectName, cpuCores, memoryBytes float64) {
	m.cpuUsage.WithLabelValues(vm.Namespace, vm.Name).Set(cpuCores)
	m.memoryUsage.WithLabelValues(vm.Namespace, vm.Name).Set(memoryBytes)
}

// UsageGone drops a VM's usage series, so that deleted or stopped VMs, and VMs whose usage
// can no longer be read (no metrics API), leave no stale ones.
func (m *Metrics) UsageGone(vm cache.ObjectName) {
	m.cpuUsage.DeleteLabelValues(vm.Namespace, vm.Name)
	m.memoryUsage.DeleteLabelValues(vm.Namespace, vm.Name)
}

// SetReconcileTimeout records --reconcile-timeout, which the StuckWorker alert measures a
// worker held on one VM against.
func (m *Metrics) SetReconcileTimeout(d time.Duration) { m.reconcileTimeout.Set(d.Seconds()) }

// SetServed records whether the VM resource is served.
func (m *Metrics) SetServed(served bool) {
	v := 0.0
	if served {
		v = 1
	}
	m.served.Set(v)
}

// CountPhases registers a gauge of VMs by phase, counted from count at each scrape, so the
// figure is as fresh as the cache and costs nothing between scrapes. Every phase a VM can be
// counted under (reconcile.CountedPhases) is exported, 0 when no VM is in it.
func (m *Metrics) CountPhases(count func() map[string]int) {
	m.registry.MustRegister(phaseCollector{count: count, known: reconcile.CountedPhases(),
		desc: prometheus.NewDesc(Namespace+"_vms", "VirtualMachines in the cache by status.phase (None: no status yet).", []string{"phase"}, nil)})
}

// OtherReason is the reason vmcontroller_vm_reasons counts a VM under whose status.reason is
// none the controller writes (reconcile.CountedReasons).
const OtherReason = "Other"

// CountReasons registers a gauge of VMs by phase and reason, counted from count at each
// scrape as CountPhases' is. It is a gauge of its own, not a reason label on vmcontroller_vms:
// with one, every query of that gauge that names a phase would read several series, one a
// reason, where it read one (a max over replicas, the largest reason's count; a min_over_time
// of Creating, a series that drops to 0 each time a VM's reason changes), and the phases'
// series at 0 would need a reason to be exported under. Every pair of
// reconcile.CountedReasons is exported, 0 when no VM has it. A reason the controller does not
// write is counted as OtherReason: status.reason is a free string, and whoever may write a
// VM's status would otherwise make a series for each word they wrote.
func (m *Metrics) CountReasons(count func() map[reconcile.PhaseReason]int) {
	known := reconcile.CountedReasons()
	reasons := map[string]bool{}
	for _, pr := range known {
		reasons[pr.Reason] = true
	}
	m.registry.MustRegister(reasonCollector{count: count, known: known, reasons: reasons,
		desc: prometheus.NewDesc(Namespace+"_vm_reasons", "VirtualMachines in the cache by status.phase and status.reason (phase None, no reason: no status yet; reason Other: one the controller does not write).", []string{"phase", "reason"}, nil)})
}

// Handler serves the metrics in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

type phaseCollector struct {
	count func() map[string]int
	known []string // exported at 0 when count has none
	desc  *prometheus.Desc
}

func (c phaseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect exports every known phase, 0 when no VM is in it, and any other phase count
// reports. A phase left out when it emptied would vanish from Prometheus rather than read
// 0, and min_over_time, which skips the gap, would hold its last count: one VM Creating for
// a minute kept VirtualMachinesStuckCreating true for half an hour.
func (c phaseCollector) Collect(ch chan<- prometheus.Metric) {
	counts := c.count()
	for _, phase := range c.known {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[phase]), phase)
	}
	for phase, n := range counts {
		if !slices.Contains(c.known, phase) {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), phase)
		}
	}
}

type reasonCollector struct {
	count   func() map[reconcile.PhaseReason]int
	known   []reconcile.PhaseReason // exported at 0 when count has none
	reasons map[string]bool         // the reasons of known: any other is OtherReason
	desc    *prometheus.Desc
}

func (c reasonCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect exports every known pair, 0 when no VM has it (for the reason phaseCollector
// exports every phase), and any other pair count reports, its reason OtherReason unless the
// controller writes it. The phase is exported as vmcontroller_vms exports it, so that the
// sum of a phase's reasons is its count there.
func (c reasonCollector) Collect(ch chan<- prometheus.Metric) {
	counts := map[reconcile.PhaseReason]int{}
	for pr, n := range c.count() {
		if !c.reasons[pr.Reason] {
			pr.Reason = OtherReason
		}
		counts[pr] += n
	}
	for _, pr := range c.known {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[pr]), pr.Phase, pr.Reason)
	}
	for pr, n := range counts {
		if !slices.Contains(c.known, pr) {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), pr.Phase, pr.Reason)
		}
	}
}

type requestResult struct{ v *prometheus.CounterVec }

func (r requestResult) Increment(_ context.Context, code, method, host string) {
	r.v.WithLabelValues(code, method, host).Inc()
}

type requestLatency struct{ v *prometheus.HistogramVec }

func (r requestLatency) Observe(_ context.Context, verb string, u url.URL, latency time.Duration) {
	r.v.WithLabelValues(verb, u.Host).Observe(latency.Seconds())
}

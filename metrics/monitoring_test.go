package metrics

import (
	"context"
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"gopkg.in/yaml.v3"
	"k8s.io/client-go/tools/cache"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"

	"github.com/cloudnative-czs/vm-controller/reconcile"
)

// The alerting rules and the dashboard users install from docs/monitoring.
var (
	rulesFile     = filepath.Join("..", "docs", "monitoring", "prometheus-rules.yaml")
	dashboardFile = filepath.Join("..", "docs", "monitoring", "grafana-dashboard.json")
)

// TestMonitoringNamesExportedMetrics fails when an alerting rule or a dashboard query names a
// metric the controller does not export, as happens when a metric is renamed or dropped:
// the alert would then never fire and the panel stay empty, silently. The exported names
// come from the registry New builds, not from a list kept beside this test.
func TestMonitoringNamesExportedMetrics(t *testing.T) {
	exported := exportedMetrics(t)

	exprs := map[string]string{} // where -> PromQL
	for where, e := range ruleExprs(t) {
		exprs[where] = e
	}
	panels, variables := dashboardExprs(t)
	for where, e := range panels {
		exprs[where] = e
	}
	for where, e := range variables {
		exprs[where] = e
	}
	if len(exprs) == 0 {
		t.Fatal("found no PromQL in the rules or the dashboard")
	}
	for where, e := range exprs {
		names := metricNames(e)
		if len(names) == 0 {
			t.Errorf("%s: %q names no metric", where, e)
		}
		for _, n := range names {
			if err := exported.check(n); err != "" {
				t.Errorf("%s: %s (in %q)", where, err, e)
			}
		}
	}
}

// exported is what the controller's registry exports: every metric name it describes,
// and the type of those that have samples after exercise.
type exported struct {
	names map[string]bool
	types map[string]dto.MetricType
}

// check says why a name is not exported, or "" when it is. A histogram's series carry the
// suffixes _bucket, _sum and _count; a summary's _sum and _count.
func (e exported) check(name string) string {
	if e.names[name] {
		return ""
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok || !e.names[base] {
			continue
		}
		typ, known := e.types[base]
		switch {
		case !known:
			return "metric " + base + " has no sample after exercise, so its type is unknown: record one in exercise"
		case typ == dto.MetricType_HISTOGRAM || (typ == dto.MetricType_SUMMARY && suffix != "_bucket"):
			return ""
		default:
			return "metric " + name + ": " + base + " is a " + typ.String() + ", which has no " + suffix + " series"
		}
	}
	return "metric " + name + " is not exported by the controller"
}

func exportedMetrics(t *testing.T) exported {
	t.Helper()
	m := exercised()
	e := exported{names: map[string]bool{}, types: map[string]dto.MetricType{}}
	descs := make(chan *prometheus.Desc)
	go func() {
		m.registry.Describe(descs)
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		match := fqName.FindStringSubmatch(d.String())
		if match == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		e.names[match[1]] = true
	}
	families, err := m.registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		e.names[f.GetName()] = true
		e.types[f.GetName()] = f.GetType()
	}
	if !e.names[Namespace+"_reconcile_total"] || !e.names["workqueue_depth"] {
		t.Fatalf("the registry describes %d metrics without the controller's own: %v", len(e.names), e.names)
	}
	return e
}

// exercised is the process's one Metrics, exercised once: the first New of the process is
// the one client-go's hooks report to.
var exercised = sync.OnceValue(func() *Metrics {
	m := New()
	m.CountPhases(func() map[string]int { return map[string]int{"Active": 1} })
	m.CountReasons(func() map[reconcile.PhaseReason]int {
		return map[reconcile.PhaseReason]int{{Phase: "Active", Reason: "ServerReady"}: 1}
	})
	exercise(m)
	return m
})

// exercise records one sample through each of the controller's paths, so that every vector
// has a series and Gather reports its type. The workqueue and REST client metrics arrive
// through client-go's process-wide hooks, which the first New of the process installs: the
// tests take the Metrics of exercised, the first.
func exercise(m *Metrics) {
	m.Reconciled("success", time.Millisecond)
	m.SetLeader(true)
	m.SetServed(true)
	m.UsageSampled(cache.ObjectName{Namespace: "ns", Name: "vm"}, 0.25, 1<<20)
	m.PassesToActive(2)

	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "monitoring_test"})
	defer q.ShutDown()
	q.AddRateLimited("a")
	q.Add("a")
	item, _ := q.Get()
	q.Done(item)

	clientmetrics.RequestResult.Increment(context.Background(), "200", "GET", "apiserver")
	clientmetrics.RequestLatency.Observe(context.Background(), "GET", url.URL{Host: "apiserver"}, time.Millisecond)
}

// ruleExprs returns the expr of every alerting and recording rule, by group and rule name.
func ruleExprs(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatalf("read rules: %v", err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert       string            `yaml:"alert"`
				Record      string            `yaml:"record"`
				Expr        string            `yaml:"expr"`
				For         string            `yaml:"for"`
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		t.Fatalf("parse %s: %v", rulesFile, err)
	}
	exprs := map[string]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			where := rulesFile + ": " + g.Name + "/" + name
			if name == "" || strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s: a rule needs a name and an expr", where)
			}
			if r.Alert != "" && (r.Labels["severity"] == "" || r.Annotations["summary"] == "") {
				t.Errorf("%s: an alert needs a severity label and a summary annotation", where)
			}
			exprs[where] = r.Expr
		}
	}
	return exprs
}

// dashboardExprs returns the query of every panel target, and of every query variable (the
// series of a label_values), each by where it is.
func dashboardExprs(t *testing.T) (panels, variables map[string]string) {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatalf("read dashboard: %v", err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var dash struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("parse %s: %v", dashboardFile, err)
	}
	panels, variables = map[string]string{}, map[string]string{}
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("parse a panel of %s: %v", dashboardFile, err)
			}
			for i, tg := range p.Targets {
				panels[dashboardFile+": panel "+p.Title+" #"+string(rune('A'+i))] = tg.Expr
			}
			walk(p.Panels) // a collapsed row holds its panels
		}
	}
	walk(dash.Panels)
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*[A-Za-z_]\w*\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("parse the query of variable %s: %v", v.Name, err)
			}
		}
		e := strings.TrimSpace(q.Query)
		if m := labelValues.FindStringSubmatch(e); m != nil {
			e = m[1] // label_values(series, label): the label is no metric
		}
		variables[dashboardFile+": variable "+v.Name] = e
	}
	return panels, variables
}

// monitoringREADME shows the PodMonitor that scrapes the controller.
var monitoringREADME = filepath.Join("..", "docs", "monitoring", "README.md")

// podMonitorTargetLabels are the labels the Prometheus Operator gives every target of a
// PodMonitor. A scraped label of the same name is renamed exported_<name> unless the endpoint
// says honorLabels: true.
var podMonitorTargetLabels = []string{"job", "instance", "namespace", "pod", "container", "endpoint"}

// TestPodMonitorKeepsMetricLabels fails when a metric the controller exports carries a label
// the PodMonitor of the README sets on its targets, and the monitor does not honour the
// metric's: vmcontroller_vm_*_usage name the VM's namespace, which Prometheus renamed
// exported_namespace, so that the dashboard's max by (namespace, name) merged the VMs of one
// name in every namespace.
func TestPodMonitorKeepsMetricLabels(t *testing.T) {
	data, err := os.ReadFile(monitoringREADME)
	if err != nil {
		t.Fatal(err)
	}
	var monitors int
	for _, block := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(data), -1) {
		var pm struct {
			Kind string `yaml:"kind"`
			Spec struct {
				PodMetricsEndpoints []struct {
					Port        string `yaml:"port"`
					HonorLabels bool   `yaml:"honorLabels"`
				} `yaml:"podMetricsEndpoints"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal([]byte(block[1]), &pm); err != nil || pm.Kind != "PodMonitor" {
			continue
		}
		monitors++
		for _, ep := range pm.Spec.PodMetricsEndpoints {
			if ep.HonorLabels {
				continue
			}
			for metric, labels := range exportedLabels(t) {
				for _, l := range labels {
					if slices.Contains(podMonitorTargetLabels, l) {
						t.Errorf("%s: the PodMonitor's endpoint %q does not say honorLabels: true, and %s has a label %s, which Prometheus renames exported_%s", monitoringREADME, ep.Port, metric, l, l)
					}
				}
			}
		}
	}
	if monitors == 0 {
		t.Fatalf("%s shows no PodMonitor", monitoringREADME)
	}
	// Under honorLabels, a metric's label of the name of one that tells the replicas apart
	// would take the place of the target's, and the rules' joins on (job, instance) with it.
	for metric, labels := range exportedLabels(t) {
		for _, l := range labels {
			if l != "namespace" && slices.Contains(podMonitorTargetLabels, l) {
				t.Errorf("%s has a label %s, which under honorLabels takes the place of the target's", metric, l)
			}
		}
	}
}

// exportedLabels are the label names of each metric the controller exports, after exercise.
func exportedLabels(t *testing.T) map[string][]string {
	t.Helper()
	families, err := exercised().registry.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string][]string{}
	for _, f := range families {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if !slices.Contains(out[f.GetName()], l.GetName()) {
					out[f.GetName()] = append(out[f.GetName()], l.GetName())
				}
			}
		}
	}
	return out
}

// sameOnEveryReplica are the gauges every replica exports with the same figure: the VM counts
// of caches that hold the same VMs, and the flags all replicas share. Summed over replicas,
// they count each VM once per replica; an alert or a panel takes their max (or min).
var sameOnEveryReplica = []string{Namespace + "_vms", Namespace + "_vm_reasons", Namespace + "_resource_served", Namespace + "_reconcile_timeout_seconds"}

// leaderOnly are the queue's figures, the work of the leader. A standby queues nothing until it
// takes over; a standby of an earlier build (in a rolling update from it) queued every VM of
// its cache and never drained the queue, and a backlog alert fired on every standby of more
// than 100 VMs. An alert or a panel counts the leader's alone, joined to its
// vmcontroller_leader of 1.
var leaderOnly = []string{"workqueue_depth", "workqueue_adds_total"}

// leaderJoin restricts an expression to the series of the leading replica.
var leaderJoin = regexp.MustCompile(`\band on \(job, instance\) vmcontroller_leader(\{[^}]*\})? == 1\b`)

// TestMonitoringAggregatesReplicas fails when an alerting rule or a panel adds up what every
// replica reports alike (with two replicas, VirtualMachinesFailed said twice the VMs there
// were) or counts a queue other than the leader's (leaderOnly).
func TestMonitoringAggregatesReplicas(t *testing.T) {
	exprs := ruleExprs(t)
	panels, _ := dashboardExprs(t) // a variable lists label values, no figure
	for where, e := range panels {
		exprs[where] = e
	}
	for where, e := range exprs {
		for _, name := range sameOnEveryReplica {
			for _, at := range selectorsOf(e, name) {
				switch agg := innermostAggregation(e, at); agg {
				case "max", "min":
				case "":
					t.Errorf("%s: %s is the same on every replica: take its max or min over replicas, not a series per replica (in %q)", where, name, e)
				default:
					t.Errorf("%s: %s is the same on every replica: take its max or min over replicas, not the %s (in %q)", where, name, agg, e)
				}
			}
		}
		for _, name := range leaderOnly {
			if len(selectorsOf(e, name)) > 0 && !leaderJoin.MatchString(e) {
				t.Errorf("%s: %s counts a standby's queue too: restrict it to the leader with and on (job, instance) vmcontroller_leader == 1 (in %q)", where, name, e)
			}
		}
	}
}

// selectorsOf returns where expr selects the metric name: each place the name stands as a
// whole identifier outside a string.
func selectorsOf(expr, name string) []int {
	s := blankStrings(expr)
	var at []int
	for i := 0; ; {
		j := strings.Index(s[i:], name)
		if j < 0 {
			return at
		}
		start, end := i+j, i+j+len(name)
		if (start == 0 || !isIdentChar(s[start-1])) && (end == len(s) || !isIdentChar(s[end])) {
			at = append(at, start)
		}
		i = end
	}
}

func isIdentChar(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// blankStrings replaces the text of every string literal of expr with underscores, keeping
// every offset, so that a parenthesis or a name in a label matcher's value counts for nothing.
func blankStrings(expr string) string {
	return promqlStrings.ReplaceAllStringFunc(expr, func(lit string) string {
		return lit[:1] + strings.Repeat("_", len(lit)-2) + lit[len(lit)-1:]
	})
}

// promqlAggregations are PromQL's aggregation operators.
var promqlAggregations = []string{"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio"}

// innermostAggregation is the aggregation operator nearest around offset at of expr, "" when
// none is: a function such as rate or min_over_time, or plain parentheses, are looked through.
func innermostAggregation(expr string, at int) string {
	name, _ := enclosingAggregation(blankStrings(expr), at)
	return name
}

// enclosingAggregation is the aggregation operator nearest around offset at of s (its strings
// blanked) and the offset of the parenthesis it opens; "" and -1 when none is.
func enclosingAggregation(s string, at int) (name string, open int) {
	depth := 0
	for i := at - 1; i >= 0; i-- {
		switch s[i] {
		case ')':
			depth++
		case '(':
			if depth > 0 {
				depth--
				continue
			}
			if name := callee(s[:i]); slices.Contains(promqlAggregations, name) {
				return name, i
			}
		}
	}
	return "", -1
}

// trailingIdent is the identifier at the end of a text.
var trailingIdent = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*$`)

// callee is the function or aggregation whose parenthesis opens right after s: the identifier
// that ends s, past a by (...) or without (...) between them; "" for plain parentheses.
func callee(s string) string {
	s = strings.TrimRight(s, " \t\n")
	if strings.HasSuffix(s, ")") {
		open := strings.LastIndex(s, "(")
		if open < 0 {
			return ""
		}
		clause := strings.TrimRight(s[:open], " \t\n")
		var ok bool
		if s, ok = strings.CutSuffix(clause, "by"); !ok {
			if s, ok = strings.CutSuffix(clause, "without"); !ok {
				return ""
			}
		}
		s = strings.TrimRight(s, " \t\n")
	}
	return trailingIdent.FindString(s)
}

func TestInnermostAggregation(t *testing.T) {
	tests := map[string]struct {
		expr string
		want string
	}{
		"sum":                     {`sum(x{phase="Failed"}) > 0`, "sum"},
		"max":                     {`max(x) > 0`, "max"},
		"none":                    {`x > 0`, ""},
		"through a function":      {`max(min_over_time(x[30m])) > 0`, "max"},
		"a function alone":        {`min_over_time(x[30m]) > 0`, ""},
		"by before":               {`sum by (phase) (x)`, "sum"},
		"by after":                {`sum(x) by (phase)`, "sum"},
		"nested":                  {`sum(max by (phase) (x{job=~"$job"}))`, "max"},
		"without":                 {`min without (pod) (x)`, "min"},
		"topk of max":             {`topk(10, max by (namespace, name) (x))`, "max"},
		"in arithmetic":           {`clamp_min(2 * max(x), 300)`, "max"},
		"plain parentheses":       {`sum((x))`, "sum"},
		"parenthesis in a string": {`sum(y{a=~"(b"}) + x`, ""},
		"of the other side":       {`sum(rate(y[5m])) / x`, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			at := selectorsOf(tc.expr, "x")
			if len(at) != 1 {
				t.Fatalf("selectorsOf(%q, x) = %v, want one place", tc.expr, at)
			}
			if got := innermostAggregation(tc.expr, at[0]); got != tc.want {
				t.Errorf("innermostAggregation(%q) = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}

var (
	promqlStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlLabels   = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlVars     = regexp.MustCompile(`\$\w+`)
	promqlNumbers  = regexp.MustCompile(`\b\d[\w.]*`) // numbers and durations
	promqlIdents   = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "inf", "nan", "by", "without", "on", "ignoring", "group_left", "group_right", "atan2"}
)

// metricNames returns the metric names a PromQL expression selects: the identifiers left
// once label matchers, strings, ranges, grouping clauses and numbers are removed that are
// neither a function or aggregation (followed by a parenthesis) nor a keyword. It reads the
// expressions this repository writes; it is not a PromQL parser.
func metricNames(expr string) []string {
	s := promqlStrings.ReplaceAllString(expr, `""`)
	s = promqlMatchers.ReplaceAllString(s, " ")
	s = promqlRanges.ReplaceAllString(s, " ")
	s = promqlLabels.ReplaceAllString(s, " ")
	s = promqlVars.ReplaceAllString(s, " ")
	s = promqlNumbers.ReplaceAllString(s, " ")
	var names []string
	for _, m := range promqlIdents.FindAllStringSubmatch(s, -1) {
		id := strings.TrimRight(strings.TrimSuffix(strings.TrimSpace(m[0]), "("), " \t\n")
		if m[1] != "" || slices.Contains(promqlKeywords, strings.ToLower(id)) {
			continue
		}
		names = append(names, id)
	}
	return names
}

func TestMetricNames(t *testing.T) {
	tests := map[string]struct {
		expr string
		want []string
	}{
		"plain":     {"vmcontroller_leader", []string{"vmcontroller_leader"}},
		"matchers":  {`vmcontroller_vms{phase="Failed",job=~"$job"} > 0`, []string{"vmcontroller_vms"}},
		"functions": {`absent(vmcontroller_leader)`, []string{"vmcontroller_leader"}},
		"histogram": {
			`histogram_quantile(0.99, sum by (le) (rate(vmcontroller_reconcile_duration_seconds_bucket[$__rate_interval])))`,
			[]string{"vmcontroller_reconcile_duration_seconds_bucket"}},
		"binary": {
			"sum(rate(a_total{code=~\"5..|<error>\"}[5m]))\n  / sum(rate(b_total[5m])) > 0.05",
			[]string{"a_total", "b_total"}},
		"keywords":  {`a > bool 1 and on (name) b unless c offset 5m`, []string{"a", "b", "c"}},
		"aggregate": {`topk(10, max by (namespace, name) (x))`, []string{"x"}},
		"none":      {`vector(1)`, nil},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := metricNames(tt.expr); !slices.Equal(got, tt.want) {
				t.Errorf("metricNames(%q) = %q, want %q", tt.expr, got, tt.want)
			}
		})
	}
}

// genericPrefixes are the prefixes of the metrics the controller exports under the names
// and labels Kubernetes' own components and most operators export them too: a rule or a
// panel that selects them by name alone counts every such program.
var genericPrefixes = []string{"workqueue_", "rest_client_"}

// controllerJoin restricts an expression to the series of the controller's replicas, by the
// vmcontroller_leader (of any value) each exports.
var controllerJoin = regexp.MustCompile(`\band\s+on\s*\(\s*job\s*,\s*instance\s*\)\s*vmcontroller_leader\b`)

// dashboardJob is the matcher of a panel's selector that keeps it to the jobs of the
// variable job, which lists the jobs of vm-controller.
var dashboardJob = regexp.MustCompile(`\bjob\s*=~\s*"\$job"`)

// TestMonitoringCountsTheControllerAlone fails when an alerting rule selects a generic
// metric (workqueue_*, rest_client_*) without restricting it to the controller's replicas
// (VMControllerStuckWorker, critical, told the operator to restart vm-controller when
// another program's queue had a long processor), or a panel selects any metric outside the
// jobs of the variable job, or that variable's All selects every job of Prometheus.
func TestMonitoringCountsTheControllerAlone(t *testing.T) {
	for where, e := range ruleExprs(t) {
		for _, name := range uniqueNames(e) {
			if !hasGenericPrefix(name) {
				continue
			}
			for _, at := range selectorsOf(e, name) {
				start, end := aggregationSpan(e, at)
				if !controllerJoin.MatchString(e[start:end]) {
					t.Errorf("%s: %s is exported by other programs too: restrict it to the controller with and on (job, instance) vmcontroller_leader in the same aggregation (in %q)", where, name, e)
				}
			}
		}
	}
	panels, _ := dashboardExprs(t)
	for where, e := range panels {
		for _, name := range uniqueNames(e) {
			for _, at := range selectorsOf(e, name) {
				if !dashboardJob.MatchString(matcherAfter(e, at+len(name))) {
					t.Errorf("%s: %s is not kept to the controller's jobs: select it with job=~\"$job\" (in %q)", where, name, e)
				}
			}
		}
	}
	job := dashboardVariable(t, "job")
	if !strings.HasPrefix(job.Query, "label_values("+Namespace+"_") {
		t.Errorf("%s: variable job lists %q, want the jobs of a metric of the controller's own (label_values(%s_..., job))", dashboardFile, job.Query, Namespace)
	}
	if job.AllValue != "" {
		t.Errorf("%s: variable job has allValue %q: All then selects that regular expression, every job of Prometheus; without it, All is the jobs listed", dashboardFile, job.AllValue)
	}
}

// uniqueNames are the metric names expr selects, each once (selectorsOf finds every place).
func uniqueNames(expr string) []string {
	names := metricNames(expr)
	slices.Sort(names)
	return slices.Compact(names)
}

// installLabels tell apart the installs of vm-controller that share one Prometheus.
var installLabels = []string{"job", "namespace"}

// ruleAggregation is an aggregation operator applied in a rule, with its by clause if any.
var ruleAggregation = regexp.MustCompile(`\b(` + strings.Join(promqlAggregations, "|") + `)\s*(?:(by|without)\s*\(([^)]*)\)\s*)?\(`)

// TestRulesPerInstall fails when an alerting rule aggregates over the installs that share a
// Prometheus: sum(vmcontroller_leader) > 1 fired for two installs with one leader each, and
// max(vmcontroller_leader) < 1 let one install's leader hide another's having none. Every
// aggregation keeps job and namespace; absent(), which cannot, is left to what it is.
func TestRulesPerInstall(t *testing.T) {
	for where, e := range ruleExprs(t) {
		for _, m := range ruleAggregation.FindAllStringSubmatch(blankStrings(e), -1) {
			clause, grouping := m[2], m[3]
			var by []string
			for _, l := range strings.Split(grouping, ",") {
				by = append(by, strings.TrimSpace(l))
			}
			for _, l := range installLabels {
				if clause != "by" || !slices.Contains(by, l) {
					t.Errorf("%s: %s merges the installs: group by %s too (in %q)", where, strings.TrimSuffix(m[0], "("), strings.Join(installLabels, ", "), e)
					break
				}
			}
		}
	}
}

func hasGenericPrefix(name string) bool {
	return slices.ContainsFunc(genericPrefixes, func(p string) bool { return strings.HasPrefix(name, p) })
}

// aggregationSpan is the text of expr, as offsets, that the selector at offset at is
// aggregated in: the parentheses of the nearest aggregation around it, or the whole
// expression when none is. A restriction to the controller outside that span comes after
// the aggregation has dropped the labels it would join on.
func aggregationSpan(expr string, at int) (start, end int) {
	s := blankStrings(expr)
	_, i := enclosingAggregation(s, at)
	if i < 0 {
		return 0, len(s)
	}
	for j, d := i+1, 0; j < len(s); j++ {
		switch s[j] {
		case '(':
			d++
		case ')':
			if d == 0 {
				return i + 1, j
			}
			d--
		}
	}
	return i + 1, len(s)
}

// matcherAfter is the label matcher ({...}) that follows a metric name ending at offset
// end of expr, "" when none does.
func matcherAfter(expr string, end int) string {
	rest := strings.TrimLeft(expr[end:], " \t\n")
	if !strings.HasPrefix(rest, "{") {
		return ""
	}
	return promqlMatchers.FindString(rest)
}

// templateVariable is a variable of the dashboard's templating, as far as the tests read it.
type templateVariable struct {
	Query    string
	AllValue string
}

// dashboardVariable returns the dashboard's variable of that name.
func dashboardVariable(t *testing.T, name string) templateVariable {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatalf("read dashboard: %v", err)
	}
	var dash struct {
		Templating struct {
			List []struct {
				Name       string          `json:"name"`
				Query      json.RawMessage `json:"query"`
				Definition string          `json:"definition"`
				AllValue   string          `json:"allValue"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("parse %s: %v", dashboardFile, err)
	}
	for _, v := range dash.Templating.List {
		if v.Name != name {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("parse the query of variable %s: %v", name, err)
			}
		}
		return templateVariable{Query: strings.TrimSpace(q.Query), AllValue: v.AllValue}
	}
	t.Fatalf("%s has no variable %s", dashboardFile, name)
	return templateVariable{}
}

func TestAggregationSpan(t *testing.T) {
	tests := map[string]struct {
		expr string
		want string
	}{
		"none":       {`x > 1 and on (job, instance) y`, `x > 1 and on (job, instance) y`},
		"sum":        {`sum(rate(x[5m]) and on (job) y) > 0`, `rate(x[5m]) and on (job) y`},
		"sum by":     {`sum by (job) (x) / sum by (job) (z)`, `x`},
		"function":   {`max by (name) (clamp_min(x, 1)) > 2`, `clamp_min(x, 1)`},
		"in a label": {`sum(w{a=")"} + x) > 0`, `w{a=")"} + x`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			at := selectorsOf(tc.expr, "x")
			if len(at) != 1 {
				t.Fatalf("selectorsOf(%q, x) = %v, want one place", tc.expr, at)
			}
			start, end := aggregationSpan(tc.expr, at[0])
			if got := tc.expr[start:end]; got != tc.want {
				t.Errorf("aggregationSpan(%q) = %q, want %q", tc.expr, got, tc.want)
			}
		})
	}
}

package metrics

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// docRow is one row of the metric table of docs/monitoring/README.md.
type docRow struct {
	names  []string // a name ending in * stands for every metric of that prefix
	typ    string
	labels []string
}

// docMetricTable reads the table under "| metric | type | labels | meaning |".
func docMetricTable(t *testing.T) []docRow {
	t.Helper()
	data, err := os.ReadFile(monitoringREADME)
	if err != nil {
		t.Fatal(err)
	}
	code := regexp.MustCompile("`([^`]+)`")
	var rows []docRow
	in := false
	for line := range strings.SplitSeq(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "| metric | type | labels | meaning |"):
			in = true
			continue
		case !in:
			continue
		case !strings.HasPrefix(line, "|"):
			return rows
		case strings.HasPrefix(line, "| ---"):
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if len(cells) < 4 {
			t.Fatalf("%s: a row of the metric table has %d cells, want 4: %q", monitoringREADME, len(cells), line)
		}
		var r docRow
		for _, m := range code.FindAllStringSubmatch(cells[0], -1) {
			r.names = append(r.names, m[1])
		}
		r.typ = strings.TrimSpace(cells[1])
		for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
			r.labels = append(r.labels, m[1])
		}
		slices.Sort(r.labels)
		rows = append(rows, r)
	}
	if !in {
		t.Fatalf("%s has no metric table", monitoringREADME)
	}
	return rows
}

// TestMetricTableMatchesRegistry fails when the metric table of docs/monitoring/README.md
// misses a metric the controller exports (it lacked vmcontroller_reconcile_passes_to_active
// and the usage gauges), names one it does not, or gives one a type or labels other than the
// registry's. go_* and process_* stand for the runtime's and the process's collectors.
func TestMetricTableMatchesRegistry(t *testing.T) {
	exp := exportedMetrics(t)
	labels := exportedLabels(t)
	documented := map[string]docRow{}
	var prefixes []string
	for _, r := range docMetricTable(t) {
		for _, n := range r.names {
			if p, ok := strings.CutSuffix(n, "*"); ok {
				prefixes = append(prefixes, p)
				continue
			}
			if _, twice := documented[n]; twice {
				t.Errorf("%s: %s has two rows", monitoringREADME, n)
			}
			documented[n] = r
		}
	}
	for name := range exp.names {
		if slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		r, ok := documented[name]
		if !ok {
			t.Errorf("%s: the metric table has no row for %s", monitoringREADME, name)
			continue
		}
		typ, known := exp.types[name]
		if !known {
			t.Errorf("metric %s has no sample after exercise, so its type and labels are unknown: record one in exercise", name)
			continue
		}
		if want := strings.ToLower(typ.String()); r.typ != want {
			t.Errorf("%s: %s is a %s in the table, a %s in the registry", monitoringREADME, name, r.typ, want)
		}
		want := slices.Sorted(slices.Values(labels[name]))
		if !slices.Equal(r.labels, want) {
			t.Errorf("%s: %s has labels %v in the table, %v in the registry", monitoringREADME, name, r.labels, want)
		}
	}
	for name := range documented {
		if !exp.names[name] {
			t.Errorf("%s: the metric table has a row for %s, which the controller does not export", monitoringREADME, name)
		}
	}
}

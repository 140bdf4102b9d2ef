package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/golden"
)

// TestReport: a results file's report is the page's markdown: for a comparison the medians'
// table, each repetition, the teardowns and the ratios to the peer; for a run of named figures
// (leader) their medians and each repetition's value. compare.json predates the teardown's
// figures (its table has their columns empty); compare-teardown.json is a run of 600 VMs on
// a busy machine that has them, its per-VM times left out. go -C bench test . -run TestReport
// -update rewrites the golden files.
func TestReport(t *testing.T) {
	for _, name := range []string{"compare", "compare-teardown", "leader"} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			if err := reportCommand([]string{filepath.Join("testdata", name+".json")}, &out); err != nil {
				t.Fatal(err)
			}
			golden.Check(t, filepath.Join("testdata", "report-"+name+".md"), out.Bytes())
		})
	}
}

// TestReportRefuses: no file, or a file that is not a results file, is an error naming it.
func TestReportRefuses(t *testing.T) {
	if err := reportCommand(nil, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "results file") {
		t.Errorf("report without a file = %v, want an error asking for one", err)
	}
	if err := reportCommand([]string{"testdata/missing.json"}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Errorf("report of a missing file = %v, want an error naming it", err)
	}
}

// TestShortAndGroup: figures lose trailing zeros, and counts get thousands separators.
func TestShortAndGroup(t *testing.T) {
	for v, want := range map[float64]string{1: "1", 2.5: "2.5", 0.0005: "0.001", 0.0004: "0", -0.0001: "0", 15.123456: "15.123"} {
		if got := short(v); got != want {
			t.Errorf("short(%v) = %q, want %q", v, got, want)
		}
	}
	for n, want := range map[string]string{"200": "200", "2000": "2,000", "100000": "100,000", "1234567": "1,234,567", "x": "x"} {
		if got := group(n); got != want {
			t.Errorf("group(%q) = %q, want %q", n, got, want)
		}
	}
}

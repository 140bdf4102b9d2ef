package reconcile

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestCountedReasons: CountedReasons is every phase and reason the decision writes, no more:
// each pair a golden case of the decision writes in the status, and each of the table of
// phases and reasons of docs/reference/phases-reasons-events.md (which has the refusals'
// reasons, decided outside Decide), and NoPhase without a reason. A reason the decision
// starts to write and the list lacks would be counted as another's (Other) and have no
// series at 0; one it no longer writes would be exported at 0 for ever.
func TestCountedReasons(t *testing.T) {
	want := map[PhaseReason]string{{NoPhase, ""}: "a VM without a status"}
	dir := filepath.Join("..", "testdata", "decide")
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || !strings.HasSuffix(path, ".golden") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var plan struct {
			Status struct{ Phase, Reason string }
		}
		if err := yaml.Unmarshal(data, &plan); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if plan.Status.Phase != "" { // a plan that writes no phase (a paused VM's conditions)
			want[PhaseReason{plan.Status.Phase, plan.Status.Reason}] = path
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 10 {
		t.Fatalf("the golden cases under %s write %d phases and reasons: %v", dir, len(want), want)
	}
	doc := filepath.Join("..", "docs", "reference", "phases-reasons-events.md")
	for _, pr := range docPhaseReasons(t, doc) {
		want[pr] = doc
	}
	got := CountedReasons()
	for _, pr := range got {
		if _, ok := want[pr]; !ok {
			t.Errorf("CountedReasons has phase %s reason %s, which no golden case writes and %s does not name", pr.Phase, pr.Reason, doc)
		}
	}
	for _, pr := range slices.SortedFunc(maps.Keys(want), comparePhaseReason) {
		if !slices.Contains(got, pr) {
			t.Errorf("CountedReasons lacks phase %s reason %s (%s)", pr.Phase, pr.Reason, want[pr])
		}
	}
	if len(slices.Compact(slices.SortedFunc(slices.Values(got), comparePhaseReason))) != len(got) {
		t.Errorf("CountedReasons has a pair twice: %v", got)
	}
}

func comparePhaseReason(a, b PhaseReason) int {
	return strings.Compare(a.Phase+"/"+a.Reason, b.Phase+"/"+b.Reason)
}

// docPhaseReasons reads the table under "## Phases and reasons" of the document at path: each
// reason with each phase of its row's phase cell ("Terminating, Failed").
func docPhaseReasons(t *testing.T, path string) []PhaseReason {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(data), "\n## Phases and reasons\n")
	if !ok {
		t.Fatalf("%s has no section Phases and reasons", path)
	}
	var out []PhaseReason
	header := true
	for line := range strings.Lines(table) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			if len(out) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		if header {
			if strings.TrimSpace(cells[0]) != "phase" || strings.TrimSpace(cells[1]) != "reason" {
				t.Fatalf("%s: the table of phases and reasons begins %q, want | phase | reason |", path, line)
			}
			header = false
			continue
		}
		if strings.HasPrefix(line, "| ---") {
			continue
		}
		for p := range strings.SplitSeq(cells[0], ",") {
			out = append(out, PhaseReason{strings.TrimSpace(p), strings.TrimSpace(cells[1])})
		}
	}
	if len(out) < 10 {
		t.Fatalf("%s: %d rows in the table of phases and reasons", path, len(out))
	}
	return out
}

// TestReasonCounts: the cached VMs are counted by phase and reason as each has them, a VM
// without a status under NoPhase and no reason, and a reason someone else wrote as it is.
func TestReasonCounts(t *testing.T) {
	w := newWorld(t)
	statuses := map[string]map[string]any{
		"lost-1":  {"phase": "Inactive", "reason": decision.ReasonNodeLost},
		"lost-2":  {"phase": "Inactive", "reason": decision.ReasonNodeLost},
		"lost-3":  {"phase": "Unknown", "reason": decision.ReasonNodeLost},
		"ready":   {"phase": "Active", "reason": decision.ReasonServerReady},
		"written": {"phase": "Failed", "reason": "WrittenByHand"},
		"new":     nil,
	}
	for name, status := range statuses {
		u := caseObject(t, "create-new")
		u.SetName(name)
		unstructured.RemoveNestedField(u.Object, "status")
		if status != nil {
			u.Object["status"] = status
		}
		if err := w.client.Tracker().Add(u); err != nil {
			t.Fatal(err)
		}
	}
	c, _ := newController(t, w, decision.UsagePolicy{})
	if got := c.ReasonCounts(); len(got) != 0 {
		t.Errorf("ReasonCounts before the cache = %v, want none", got)
	}
	start(t, c)
	for name := range statuses {
		eventually(t, "the cache holds "+name, func() bool {
			_, ok := c.view(cache.ObjectName{Namespace: testVM.Namespace, Name: name})
			return ok
		})
	}
	want := map[PhaseReason]int{
		{string(schema.PhaseInactive), decision.ReasonNodeLost}:  2,
		{string(schema.PhaseUnknown), decision.ReasonNodeLost}:   1,
		{string(schema.PhaseActive), decision.ReasonServerReady}: 1,
		{string(schema.PhaseFailed), "WrittenByHand"}:            1,
		{NoPhase, ""}: 1,
	}
	if got := c.ReasonCounts(); !reflect.DeepEqual(got, want) {
		t.Errorf("ReasonCounts = %v, want %v", got, want)
	}
}

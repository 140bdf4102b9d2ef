package decision_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestTroubleshootingReasons holds docs/troubleshooting.md's table of stuck VMs to the
// decision: a row that quotes what a backend says of a server that waits (the scheduler's,
// the kubelet's words) gives the phase and reason the decision reports for it, so that a user
// who looks a VM up by the reason `kubectl get vm -o wide` shows finds its row.
func TestTroubleshootingReasons(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := tableRows(string(doc), "phase / reason")
	if len(rows) == 0 {
		t.Fatal(`no table with the column "phase / reason" in docs/troubleshooting.md`)
	}
	tests := map[string]struct {
		wait backend.Waiting
		// quoted: words of the backend's message that a row of the table quotes.
		quoted string
	}{
		"no room":   {backend.Waiting{Reason: backend.WaitUnschedulable, Message: "0/3 nodes are available: 3 Insufficient cpu."}, "Insufficient cpu"},
		"placement": {backend.Waiting{Reason: backend.WaitUnschedulable, Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}, "didn't match Pod's node affinity/selector"},
		"taint":     {backend.Waiting{Reason: backend.WaitUnschedulable, Message: "0/3 nodes are available: 3 node(s) had untolerated taint {dedicated: db}."}, "untolerated taint"},
		"image":     {backend.Waiting{Reason: backend.WaitImage, Message: "ErrImagePull: lookup pull-fails.invalid: no such host"}, "ErrImagePull"},
	}
	file := filepath.Join(cases, "stuck-unschedulable.txtar")
	vm, srv := decidecase.Read(t, file)
	p := casePolicy(t, file)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := *srv
			s.Waiting = tc.wait
			s.Waiting.Since = now
			plan := p.Decide(decision.Input{VM: vm, Server: &s, Now: now})
			if plan.Status == nil {
				t.Fatalf("no status:\n%s", renderPlan(t, plan))
			}
			want := string(plan.Status.Phase) + " / " + plan.Status.Reason
			found := 0
			for _, r := range rows {
				if !strings.Contains(r[0]+r[1], tc.quoted) {
					continue
				}
				found++
				if got, _, _ := strings.Cut(r[0], ","); strings.TrimSpace(got) != want {
					t.Errorf("the row that quotes %q says %q; the VM says %s", tc.quoted, r[0], want)
				}
			}
			if found == 0 {
				t.Errorf("no row quotes %q", tc.quoted)
			}
		})
	}
}

// tableRows returns the cells of the rows of the Markdown tables in doc whose first column's
// header is first.
func tableRows(doc, first string) [][]string {
	var rows [][]string
	in, header := false, false
	for line := range strings.Lines(doc) {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "|") {
			in, header = false, false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case !header:
			header, in = true, cells[0] == first
		case strings.Trim(strings.Join(cells, ""), "-: ") == "":
		case in && len(cells) >= 2:
			rows = append(rows, cells)
		}
	}
	return rows
}

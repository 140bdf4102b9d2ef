package reconcile

import (
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
)

// TestControllerRoom: the reconcile gives the decision the hosts the backend knows
// (backend.Rooms). A server whose resize its node refused (golden case
// resize-infeasible-in-place) is kept under --resize in-place, RestartRequired saying why,
// when no node has room for the new size; replaced when one has, or when the backend knows
// no nodes.
func TestControllerRoom(t *testing.T) {
	for name, tc := range map[string]struct {
		hosts    *backend.Hosts
		replaced bool
	}{
		"no node has room": {hosts: decidecase.Hosts(t, caseFile("resize-infeasible-no-room"))},
		"a node has room":  {hosts: decidecase.Hosts(t, caseFile("resize-infeasible-room")), replaced: true},
		"nodes unknown":    {replaced: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "resize-infeasible-in-place")
			_, srv := decidecase.Read(t, caseFile("resize-infeasible-in-place"))
			c, r := newController(t, w, decision.UsagePolicy{})
			ctx := start(t, c)
			vm, ok := c.view(testVM)
			if !ok {
				t.Fatal("the VM is not cached")
			}
			w.servers.Set(ownerOf(vm), srv)
			w.servers.SetHosts(tc.hosts)

			c.queue.Add(testVM)
			c.processNextItem(ctx)
			if got := r.last(); got != "success" {
				t.Fatalf("reconcile: %q, want success", got)
			}
			after, _ := w.servers.Observe(ownerOf(vm))
			if replaced := after == nil || after.Deleting; replaced != tc.replaced {
				t.Fatalf("server %+v after the reconcile; replaced: %v, want %v", after, replaced, tc.replaced)
			}
			phase := status(t, w, testVM, "phase")
			if tc.replaced {
				return
			}
			cond := ""
			obj := w.vm(t, testVM.Namespace, testVM.Name)
			conds, _ := obj.Object["status"].(map[string]any)["conditions"].([]any)
			for _, c := range conds {
				if m := c.(map[string]any); m["type"] == "RestartRequired" {
					cond = m["reason"].(string) + ": " + m["message"].(string)
				}
			}
			if phase != "Active" || !strings.HasPrefix(cond, "ResizeNoRoom: ") || !strings.Contains(cond, "no node has allocatable cpu 64 (the largest has 32)") {
				t.Errorf("phase %s, RestartRequired %q: want Active, ResizeNoRoom naming the largest node", phase, cond)
			}
		})
	}
}

package reconcile

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
)

// TestControllerStatusNotKept: a CRD older than the controller prunes a status field this
// version writes (status.rootDisk.request), which the fields check at start would refuse but
// does not see under --watch-crd=false. Deciding again on what the API server answered would
// write the status again: the reconcile ends at the first write the API server did not keep
// as sent, with one warning for the whole controller. Through the status subresource, where
// the second write of the same status is stored as no change, the first reconcile sent it
// up to maxDecisions times; through the main resource, where every status write claims a
// new generation and is stored, the last write's echo brought the VM back for ever.
func TestControllerStatusNotKept(t *testing.T) {
	for name, main := range routes {
		t.Run(name, func(t *testing.T) {
			const vmCase = "claim/status-without-request"
			w := routedWorld(t, main, vmCase)
			w.prune = [][]string{{"status", "rootDisk", "request"}}
			owner := ownerOf(w.view(t, vmCase))
			_, srv := decidecase.Read(t, caseFile(vmCase))
			w.servers.Set(owner, srv)
			w.servers.SetDisk(owner, decidecase.Disk(t, caseFile(vmCase)))
			c, _ := newDiskController(t, w)
			c.cfg.NoStatusSubresource = main
			c.applier.route = statusRoute{main: main}
			var logs bytes.Buffer
			c.log = slog.New(slog.NewTextHandler(&logs, nil))
			ctx := start(t, c)
			var perReconcile []int
			for range 3 {
				before := len(w.writes()) + len(w.unchanged)
				if _, err := c.reconcile(ctx, testVM, c.log, false); err != nil {
					t.Fatal(err)
				}
				cachedAt(t, c, w, testVM)
				perReconcile = append(perReconcile, len(w.writes())+len(w.unchanged)-before)
			}
			// The first reconcile writes once (main resource: stored, not kept) or twice
			// (subresource: stored with lastUpdateTime, then kept as no change); each after
			// it once, ended by the same check. The echoes of the stored writes are the
			// controller's own: nothing brings the VM back.
			for i, n := range perReconcile {
				if n == 0 || n > 2 || i > 0 && n != 1 {
					t.Errorf("writes per reconcile %v, want at most 2 in the first, then 1", perReconcile)
					break
				}
			}
			if n := strings.Count(logs.String(), "was not kept as sent by the API server"); n != 1 {
				t.Errorf("%d warnings, want one:\n%s", n, logs.String())
			}
		})
	}
}

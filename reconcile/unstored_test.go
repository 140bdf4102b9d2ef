package reconcile

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
)

// TestControllerWriteStoredNothing: a CRD older than the controller prunes a status field this
// version writes (status.rootDisk.request), which the fields check at start would refuse but
// does not see under --watch-crd=false. The decision's status write is then stored as no
// change (after a first write that moved lastUpdateTime with it), and deciding again on the
// answer would send it again: the reconcile ends at the first such write, with one warning
// for the whole controller. Before, the first reconcile sent it again up to maxDecisions.
func TestControllerWriteStoredNothing(t *testing.T) {
	const name = "claim/status-without-request"
	w := newWorld(t, name)
	w.prune = [][]string{{"status", "rootDisk", "request"}}
	owner := ownerOf(w.view(t, name))
	_, srv := decidecase.Read(t, caseFile(name))
	w.servers.Set(owner, srv)
	w.servers.SetDisk(owner, decidecase.Disk(t, caseFile(name)))
	c, _ := newDiskController(t, w)
	var logs bytes.Buffer
	c.log = slog.New(slog.NewTextHandler(&logs, nil))
	ctx := start(t, c)
	for i := range 2 {
		if _, err := c.reconcile(ctx, testVM, c.log, false); err != nil {
			t.Fatal(err)
		}
		if n := len(w.unchanged); n != i+1 {
			t.Fatalf("after reconcile %d: %d writes stored as no change, want %d: one per reconcile", i+1, n, i+1)
		}
	}
	if ws := w.writes(); len(ws) != 1 {
		t.Errorf("writes stored %+v, want one: the first, which also moved lastUpdateTime", ws)
	}
	if n := strings.Count(logs.String(), "changed nothing on the API server"); n != 1 {
		t.Errorf("%d warnings, want one:\n%s", n, logs.String())
	}
}

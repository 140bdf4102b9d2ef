package reconcile

import (
	"bytes"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
//
// Every later reconcile of the VM (a change of its server, a requeue) decided again, found the
// field still missing and sent the same status again, not kept either: one or two writes per
// reconcile per VM for as long as the old CRD stayed. At the version the
// API server answered with, a status that says the same is not sent again (notKept), though
// each reconcile is a minute later and the status's lastUpdateTime with it; a VM changed since
// (a label, its spec) or a status that says something else (its server's address) is written.
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
			c.cfg.CRD.NoStatusSubresource = main
			c.applier.route = statusRoute{main: main}
			var minutes atomic.Int64 // the clock, a minute on at each reconcile
			clock := func() time.Time { return now.Add(time.Duration(minutes.Load()) * time.Minute) }
			c.cfg.Now, c.applier.now = clock, clock
			var logs bytes.Buffer
			c.log = slog.New(slog.NewTextHandler(&logs, nil))
			ctx := start(t, c)

			for _, step := range []struct {
				name   string
				change func(t *testing.T) // before the reconcile; nil: none
				// write: the reconcile sends a status (not kept); else it sends nothing.
				write bool
				// check, if set, checks the VM as the API server holds it after the reconcile.
				check func(t *testing.T)
			}{
				{name: "first", write: true},
				{name: "again"},
				{name: "again, later"},
				{name: "server's address changed", write: true, change: func(t *testing.T) {
					moved := *srv
					moved.IP = "10.0.0.9"
					w.servers.Set(owner, &moved)
				}, check: func(t *testing.T) {
					if ip := status(t, w, testVM, "server", "ip"); ip != "10.0.0.9" {
						t.Errorf("status.server.ip %q, want the server's new address", ip)
					}
				}},
				{name: "again after the address"},
				{name: "labelled", write: true, change: func(t *testing.T) {
					changeVM(t, w, func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"team": "a"}) })
				}},
				{name: "again after the label"},
				{name: "spec changed", write: true, change: func(t *testing.T) {
					changeVM(t, w, func(u *unstructured.Unstructured) {
						if err := unstructured.SetNestedField(u.Object, "Retain", "spec", "rootDiskReclaimPolicy"); err != nil {
							t.Fatal(err)
						}
						u.SetGeneration(u.GetGeneration() + 1)
					})
				}, check: func(t *testing.T) {
					if gen, observed, _ := generations(t, w); observed != gen {
						t.Errorf("status.observedGeneration %d, want %d: the spec's change is observed", observed, gen)
					}
				}},
				{name: "again after the spec"},
			} {
				if step.change != nil {
					step.change(t)
					cachedAt(t, c, w, testVM)
				}
				minutes.Add(1)
				before := len(w.writes()) + len(w.unchanged)
				if _, err := c.reconcile(ctx, testVM, c.log, false); err != nil {
					t.Fatalf("%s: %v", step.name, err)
				}
				// The reconcile has returned: every write it made is logged.
				statusWrites := 0
				for _, wr := range append(w.writes(), w.unchanged...)[before:] {
					if at(wr.body, "status") != nil {
						statusWrites++
					}
				}
				sent := len(w.writes()) + len(w.unchanged) - before
				// At most two: through the subresource, one stored with lastUpdateTime and the
				// change, then the same status kept as no change; through the main resource,
				// one, stored and not kept. (A disk's or a finalizer's write is none.)
				switch {
				case step.write && (statusWrites == 0 || statusWrites > 2):
					t.Errorf("%s: %d status writes (%d in all), want one or two", step.name, statusWrites, sent)
				case !step.write && sent != 0:
					t.Errorf("%s: %d writes (%d of the status), want none: the status was not kept at this version", step.name, sent, statusWrites)
				}
				if step.check != nil {
					step.check(t)
				}
				cachedAt(t, c, w, testVM)
			}
			if n := strings.Count(logs.String(), "was not kept as sent by the API server"); n != 1 {
				t.Errorf("%d warnings, want one:\n%s", n, logs.String())
			}
			if got := status(t, w, testVM, "rootDisk", "request"); got != "" {
				t.Errorf("status.rootDisk.request %q kept, want it pruned throughout", got)
			}

			// What is remembered of the VM goes with it.
			if n := c.ledger.notKept.len(); n != 1 {
				t.Fatalf("%d statuses not kept remembered, want the VM's", n)
			}
			if err := w.client.Tracker().Delete(vmGVR, testVM.Namespace, testVM.Name); err != nil {
				t.Fatal(err)
			}
			eventually(t, "the cache lets the VM go", func() bool { _, ok := c.view(testVM); return !ok })
			if _, err := c.reconcile(ctx, testVM, c.log, false); err != nil {
				t.Fatal(err)
			}
			if n := c.ledger.notKept.len(); n != 0 {
				t.Errorf("%d statuses not kept remembered after the VM went, want none", n)
			}
		})
	}
}

// changeVM changes the VM in the API as someone else's write would: with a new
// resourceVersion.
func changeVM(t *testing.T, w *world, change func(*unstructured.Unstructured)) {
	t.Helper()
	u := w.vm(t, testVM.Namespace, testVM.Name)
	change(u)
	n, _ := strconv.Atoi(u.GetResourceVersion())
	u.SetResourceVersion(strconv.Itoa(n + 1))
	if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
}

// len is how many VMs n remembers a status of.
func (n *notKept) len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.m)
}

package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// pinningBackend is the memory backend with a disk that answers DiskPinned, counting the
// questions.
type pinningBackend struct {
	*memory.Backend
	why   string
	nodes *corev1.NodeSelector // the volume's node affinity
	err   error
	mu    sync.Mutex // asked is read by the test while a worker may ask
	asked int
}

func (b *pinningBackend) DiskPinned(context.Context, backend.Owner) (backend.Pin, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.asked++
	return backend.Pin{Why: b.why, NodeAffinity: b.nodes}, b.err
}

// questions is how many times DiskPinned was asked.
func (b *pinningBackend) questions() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.asked
}

// TestPinnedAskedOnRequestOnly: the backend is asked whether the disk is bound to its node
// only for a live VM's migration asked for and not yet acted on, under --root-disk claim; its
// answer reaches the decision on a copy of the disk, and an error is the reconcile's. Under
// ephemeral (where the controller may not read claims and volumes, and a disk left from claim
// is one a new server does not mount) and for a deleted VM it is not asked: an error there
// held the VM's way out for ever.
func TestPinnedAskedOnRequestOnly(t *testing.T) {
	fields := decidecase.Fields(t)
	vmOf := func(annotation, recorded string, more ...string) schema.VirtualMachine {
		raw := `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"vm","namespace":"ns"` + strings.Join(more, "")
		if annotation != "" {
			raw += `,"annotations":{"cloudnative.czs/migrateRequestedAt":"` + annotation + `"}`
		}
		raw += `},"spec":{},"status":{`
		if recorded != "" {
			raw += `"migration":{"requestedAt":"` + recorded + `","phase":"Succeeded"}`
		}
		raw += `}}`
		vm, err := schema.Parse([]byte(raw), fields)
		if err != nil {
			t.Fatal(err)
		}
		return vm
	}
	cached := &backend.Disk{Name: "vm-rootdisk", Phase: backend.DiskBound}
	deleted := `,"deletionTimestamp":"2026-06-01T12:00:00Z","finalizers":["cloudnative.czs/vm-controller"]`
	tests := map[string]struct {
		vm    schema.VirtualMachine
		disk  *backend.Disk
		mode  decision.RootDiskMode
		asked int
	}{
		"no request":               {vmOf("", ""), cached, decision.RootDiskClaim, 0},
		"request recorded":         {vmOf("t1", "t1"), cached, decision.RootDiskClaim, 0},
		"no disk":                  {vmOf("t1", ""), nil, decision.RootDiskClaim, 0},
		"new request":              {vmOf("t2", "t1"), cached, decision.RootDiskClaim, 1},
		"new request, ephemeral":   {vmOf("t2", "t1"), cached, decision.RootDiskEphemeral, 0},
		"new request, VM deleted":  {vmOf("t2", "t1", deleted), cached, decision.RootDiskClaim, 0},
		"new request, zero policy": {vmOf("t2", "t1"), cached, "", 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := &pinningBackend{Backend: memory.New(), why: "its volume pv is a local volume on node-a", nodes: onNode("node-a")}
			policy := decision.DefaultPolicy
			policy.RootDisk = tc.mode
			c := &Controller{cfg: Config{Backend: b, Policy: policy}, opt: optionalOf(b)}
			got, err := c.pinned(context.Background(), tc.vm, backend.Owner{Namespace: "ns", Name: "vm"}, tc.disk)
			if err != nil {
				t.Fatal(err)
			}
			if b.asked != tc.asked {
				t.Fatalf("asked %d times, want %d", b.asked, tc.asked)
			}
			switch {
			case tc.asked == 0 && got != tc.disk:
				t.Errorf("disk %+v, want the cached one as it is", got)
			case tc.asked > 0 && (got == cached || got.Pinned != b.why || got.NodeAffinity != b.nodes || cached.Pinned != "" || cached.NodeAffinity != nil):
				t.Errorf("disk %+v (cached %+v): want a copy that says %q, with the volume's node affinity", got, cached, b.why)
			}
		})
	}
	b := &pinningBackend{Backend: memory.New(), err: errors.New("forbidden")}
	c := &Controller{cfg: Config{Backend: b}, opt: optionalOf(b)}
	if _, err := c.pinned(context.Background(), vmOf("t1", ""), backend.Owner{}, cached); err == nil {
		t.Error("an error of the backend is no error of the reconcile")
	}
}

// onNode is the node affinity of a volume on node (TopoLVM's, by the driver's node label).
func onNode(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "topology.topolvm.io/node", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}}
}

// TestControllerReplacementReachesDisk: a placement change that needs a new server, on a VM
// whose disk is a TopoLVM volume on its node (golden cases claim/placement-pinned-*). The
// disk's node affinity, which the cache does not have, is read past it once the decision
// would replace the running server, and the VM decided again on it: where the new placement
// admits no node the disk can be reached from, the server keeps running, RestartRequired
// (ResizeNoRoom) naming the disk; where it admits the disk's node, the server is replaced.
// It is read only then: not when the nodes are unknown (nothing to match it against), not once
// the record keeps the server, and not under --root-disk ephemeral (no disk to follow).
func TestControllerReplacementReachesDisk(t *testing.T) {
	for name, tc := range map[string]struct {
		file     string // the golden case, under testdata/decide/claim
		hosts    bool   // the backend knows the case's nodes
		policy   decision.Policy
		replaced bool
		asked    int // questions in the two reconciles
	}{
		"no node the disk reaches": {file: "placement-pinned-no-room", hosts: true, policy: decision.DefaultPolicy, asked: 1},
		"the disk's node admitted": {file: "placement-pinned-room", hosts: true, policy: decision.DefaultPolicy, replaced: true, asked: 1},
		"nodes unknown":            {file: "placement-pinned-no-room", policy: decision.DefaultPolicy, replaced: true},
		"ephemeral":                {file: "placement-pinned-no-room", hosts: true, policy: serverPolicy, replaced: true},
	} {
		t.Run(name, func(t *testing.T) {
			file := "claim/" + tc.file
			w := newWorld(t, file)
			b := &pinningBackend{Backend: w.servers, nodes: onNode("node-a")}
			r := &results{}
			c := New(Config{VMs: w.source(), Backend: b, Policy: tc.policy, Retry: quickRetry(),
				Report: w.report(r), Now: func() time.Time { return now }})
			ctx := start(t, c)
			vm, ok := c.view(testVM)
			if !ok {
				t.Fatal("the VM is not cached")
			}
			_, srv := decidecase.Read(t, caseFile(file))
			disk := decidecase.Disk(t, caseFile(file))
			disk.NodeAffinity = nil // the cache's: the claim, not its volume
			w.servers.Set(ownerOf(vm), srv)
			w.servers.SetDisk(ownerOf(vm), disk)
			if tc.hosts {
				w.servers.SetHosts(decidecase.Hosts(t, caseFile(file)))
			}
			for range 2 { // the change, then the VM as the first wrote it
				c.queue.Add(testVM)
				c.processNextItem(ctx)
				if got := r.last(); got != "success" {
					t.Fatalf("reconcile: %q, want success", got)
				}
				if after, _ := w.servers.Observe(ownerOf(vm)); after == nil || after.Deleting {
					break
				}
			}
			after, _ := w.servers.Observe(ownerOf(vm))
			if replaced := after == nil || after.Deleting; replaced != tc.replaced {
				t.Errorf("server %+v after the reconcile; replaced: %v, want %v", after, replaced, tc.replaced)
			}
			if got := b.questions(); got != tc.asked {
				t.Errorf("asked %d times for the disk's node affinity, want %d", got, tc.asked)
			}
			if tc.replaced {
				return
			}
			kept := false
			obj := w.vm(t, testVM.Namespace, testVM.Name)
			conds, _ := obj.Object["status"].(map[string]any)["conditions"].([]any)
			for _, c := range conds {
				m := c.(map[string]any)
				kept = kept || m["type"] == "RestartRequired" && m["reason"] == decision.ReasonResizeNoRoom &&
					strings.Contains(m["message"].(string), "its disk test-vm-rootdisk can be reached from")
			}
			if !kept {
				t.Errorf("conditions %v: want RestartRequired, ResizeNoRoom, naming the disk", conds)
			}
		})
	}
}

// TestControllerResizeRefusedReachesDisk: a resize the API server refuses outright
// (ErrResizeInfeasible), under --resize in-place, on a VM whose disk is a zone's (golden case
// claim/resize-replace-zonal-no-room: node-b, in another zone, has the cpu; no node of the
// disk's zone has). The refusal is decided on the disk's node affinity, read past the cache
// once: the server is kept with RestartRequired (ResizeNoRoom) naming the disk in the one
// status write, where a refusal decided without it wrote Resizing (ResizeInfeasible),
// promising the next decision would replace the server, which the next round, reading the
// node affinity, took back. A read that fails is the reconcile's error, with nothing written:
// the next try asks for the resize again.
func TestControllerResizeRefusedReachesDisk(t *testing.T) {
	for name, tc := range map[string]struct {
		err      error    // the backend's answer to DiskPinned
		outcome  string   // of each reconcile
		asked    int      // questions in the two reconciles
		statuses []string // the lifecycle conditions of the status writes, as Type/Reason
	}{
		"read":       {outcome: "success", asked: 1, statuses: []string{"RestartRequired/" + decision.ReasonResizeNoRoom}},
		"read fails": {err: errors.New("connection refused"), outcome: "error", asked: 2}, // once a refusal
	} {
		t.Run(name, func(t *testing.T) {
			file := "claim/resize-replace-zonal-no-room"
			w := newWorld(t, file)
			b := &pinningBackend{Backend: w.servers, err: tc.err, nodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}
			policy := decision.DefaultPolicy
			policy.Resize = decision.ResizeInPlace
			r := &results{}
			c := New(Config{VMs: w.source(), Backend: b, Policy: policy, Retry: quickRetry(),
				Report: w.report(r), Now: func() time.Time { return now }})
			ctx := start(t, c)
			vm, ok := c.view(testVM)
			if !ok {
				t.Fatal("the VM is not cached")
			}
			_, srv := decidecase.Read(t, caseFile(file))
			disk := decidecase.Disk(t, caseFile(file))
			disk.NodeAffinity = nil // the cache's: the claim, not its volume
			w.servers.Set(ownerOf(vm), srv)
			w.servers.SetDisk(ownerOf(vm), disk)
			w.servers.SetHosts(decidecase.Hosts(t, caseFile(file)))
			w.servers.AnswerResizes(memory.ResizeAnswer{Refuse: "node capacity"})
			for range 2 { // the resize refused, then the VM as its refusal was written
				c.queue.Add(testVM)
				c.processNextItem(ctx)
				if got := r.last(); got != tc.outcome {
					t.Fatalf("reconcile: %q, want %s", got, tc.outcome)
				}
			}
			if after, _ := w.servers.Observe(ownerOf(vm)); after == nil || after.Deleting || after.ID != srv.ID {
				t.Errorf("server %+v after the reconciles, want %s kept", after, srv.ID)
			}
			if got := b.questions(); got != tc.asked {
				t.Errorf("asked %d times for the disk's node affinity, want %d", got, tc.asked)
			}
			var statuses []string
			for _, wr := range w.writes() {
				conds, _ := at(wr.body, "status", "conditions").([]any)
				for _, c := range conds {
					if m := c.(map[string]any); m["type"] == "RestartRequired" || m["type"] == "Resizing" {
						statuses = append(statuses, fmt.Sprintf("%s/%s", m["type"], m["reason"]))
					}
				}
			}
			if !slices.Equal(statuses, tc.statuses) {
				t.Errorf("status writes with conditions %q, want %q", statuses, tc.statuses)
			}
			if tc.err != nil {
				return
			}
			kept := false
			obj := w.vm(t, testVM.Namespace, testVM.Name)
			conds, _ := obj.Object["status"].(map[string]any)["conditions"].([]any)
			for _, c := range conds {
				m := c.(map[string]any)
				kept = kept || m["type"] == "RestartRequired" && m["reason"] == decision.ReasonResizeNoRoom &&
					strings.Contains(m["message"].(string), "its disk test-vm-rootdisk can be reached from") &&
					strings.Contains(m["message"].(string), "the node cannot resize it in place")
			}
			if !kept {
				t.Errorf("conditions %v: want RestartRequired, ResizeNoRoom, naming the disk and the refusal", conds)
			}
		})
	}
}

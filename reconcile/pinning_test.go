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

// diskReach is a started controller over the VM of a golden case (testdata/decide/<file>)
// whose server runs and whose disk the backend holds as the cache has it: the claim, without
// its volume's node affinity, which only the pinningBackend answers. The tests that a
// decision reads the disk's node affinity past the cache start from one.
type diskReach struct {
	w     *world
	c     *Controller
	r     *results
	ctx   context.Context
	owner backend.Owner
	srv   *backend.Server // the case's server, as the backend holds it
}

// newDiskReach starts a diskReach for file under policy, over b, whose Backend it sets to the
// world's servers; hosts: the backend knows the case's nodes.
func newDiskReach(t *testing.T, file string, b *pinningBackend, policy decision.Policy, hosts bool) diskReach {
	t.Helper()
	w := newWorld(t, file)
	b.Backend = w.servers
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
	owner := ownerOf(vm)
	w.servers.Set(owner, srv)
	w.servers.SetDisk(owner, disk)
	if hosts {
		w.servers.SetHosts(decidecase.Hosts(t, caseFile(file)))
	}
	return diskReach{w: w, c: c, r: r, ctx: ctx, owner: owner, srv: srv}
}

// reconcile queues the VM and reconciles it once; an outcome other than want fails the test.
func (d diskReach) reconcile(t *testing.T, want string) {
	t.Helper()
	d.c.queue.Add(testVM)
	d.c.processNextItem(d.ctx)
	if got := d.r.last(); got != want {
		t.Fatalf("reconcile: %q, want %s", got, want)
	}
}

// replaced reports whether the VM's server is gone or being deleted, and the server.
func (d diskReach) replaced() (bool, *backend.Server) {
	after, _ := d.w.servers.Observe(d.owner)
	return after == nil || after.Deleting, after
}

// wantKept fails the test unless the VM's conditions keep the server: RestartRequired
// (ResizeNoRoom) with a message that says each of says.
func (d diskReach) wantKept(t *testing.T, says ...string) {
	t.Helper()
	obj := d.w.vm(t, testVM.Namespace, testVM.Name)
	conds, _ := obj.Object["status"].(map[string]any)["conditions"].([]any)
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] != "RestartRequired" || m["reason"] != decision.ReasonResizeNoRoom {
			continue
		}
		msg, _ := m["message"].(string)
		if missing := slices.ContainsFunc(says, func(s string) bool { return !strings.Contains(msg, s) }); !missing {
			return
		}
	}
	t.Errorf("conditions %v: want RestartRequired, ResizeNoRoom, saying %q", conds, says)
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
			b := &pinningBackend{nodes: onNode("node-a")}
			d := newDiskReach(t, "claim/"+tc.file, b, tc.policy, tc.hosts)
			for range 2 { // the change, then the VM as the first wrote it
				d.reconcile(t, "success")
				if replaced, _ := d.replaced(); replaced {
					break
				}
			}
			if replaced, after := d.replaced(); replaced != tc.replaced {
				t.Errorf("server %+v after the reconcile; replaced: %v, want %v", after, replaced, tc.replaced)
			}
			if got := b.questions(); got != tc.asked {
				t.Errorf("asked %d times for the disk's node affinity, want %d", got, tc.asked)
			}
			if !tc.replaced {
				d.wantKept(t, "its disk test-vm-rootdisk can be reached from")
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
			b := &pinningBackend{err: tc.err, nodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}}}}
			policy := decision.DefaultPolicy
			policy.Resize = decision.ResizeInPlace
			d := newDiskReach(t, "claim/resize-replace-zonal-no-room", b, policy, true)
			d.w.servers.AnswerResizes(memory.ResizeAnswer{Refuse: "node capacity"})
			for range 2 { // the resize refused, then the VM as its refusal was written
				d.reconcile(t, tc.outcome)
			}
			if replaced, after := d.replaced(); replaced || after.ID != d.srv.ID {
				t.Errorf("server %+v after the reconciles, want %s kept", after, d.srv.ID)
			}
			if got := b.questions(); got != tc.asked {
				t.Errorf("asked %d times for the disk's node affinity, want %d", got, tc.asked)
			}
			var statuses []string
			for _, wr := range d.w.writes() {
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
			if tc.err == nil {
				d.wantKept(t, "its disk test-vm-rootdisk can be reached from", "the node cannot resize it in place")
			}
		})
	}
}

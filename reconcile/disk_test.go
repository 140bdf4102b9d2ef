package reconcile

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/backend/memory"
	"github.com/cloudnative-czs/vm-controller/internal/decidecase"
	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The tests of the VM's disk (--root-disk claim, decision.DefaultPolicy) in the loop and the
// apply step, against the memory backend's disks.

// diskApplier is the world's applier under --root-disk claim.
func (w *world) diskApplier() applier {
	a := w.applier()
	a.policy, a.disks = decision.DefaultPolicy, newDiskExpectations()
	return a
}

// newDiskController builds a controller over w under --root-disk claim.
func newDiskController(t testing.TB, w *world) (*Controller, *results) {
	t.Helper()
	r := &results{}
	c := New(Config{VMs: w.source(), Backend: w.servers, Policy: decision.DefaultPolicy, Retry: quickRetry(),
		Report: w.report(r), Now: func() time.Time { return now }})
	return c, r
}

// reasons are the reasons of the events recorded so far, in order.
func (w *world) reasons() []string {
	var out []string
	for _, e := range w.events() {
		if f := strings.Fields(e); len(f) > 1 {
			out = append(out, f[1])
		}
	}
	return out
}

// TestControllerDiskToActive: a new VM's way to Active under --root-disk claim, on a disk that
// binds by itself. The first reconcile makes the disk, with the finalizer before it and one
// status write, and no server: a server whose disk is not bound yet is one the scheduler only
// fails to place. The disk getting bound brings the server, and writes nothing; the server
// ready writes the Active status with the bound disk. The VM is written as often as without a
// disk: finalizer, Creating, Active.
func TestControllerDiskToActive(t *testing.T) {
	w := newWorld(t, "create-new")
	c, r := newDiskController(t, w)
	ctx := start(t, c)
	owner := ownerOf(w.view(t, "create-new"))

	c.processNextItem(ctx)
	if got := r.last(); got != "success" {
		t.Fatalf("first reconcile: %q", got)
	}
	disk, _ := w.servers.ObserveDisk(owner)
	if srv, _ := w.servers.Observe(owner); disk == nil || disk.Phase != backend.DiskPending || srv != nil {
		t.Fatalf("disk %+v, server %+v: want a disk being bound, and no server yet", disk, srv)
	}
	if got := strings.Join(w.reasons(), ","); got != "CreatingDisk" {
		t.Errorf("events %s: want the disk's", got)
	}
	if claim := status(t, w, testVM, "rootDisk", "claimName"); claim != disk.Name || status(t, w, testVM, "rootDisk", "phase") != "Pending" ||
		status(t, w, testVM, "reason") != decision.ReasonServerCreating {
		t.Errorf("status reports %s, disk %q in phase %q", status(t, w, testVM, "reason"), claim, status(t, w, testVM, "rootDisk", "phase"))
	}
	settle := func() {
		cachedAt(t, c, w, testVM)
		for c.queue.Len() > 0 {
			c.processNextItem(ctx)
		}
	}
	settle()
	if n := len(w.writes()); n != 2 {
		t.Fatalf("writes %+v, want the finalizer and the status", w.writes())
	}

	if err := w.servers.Bind(owner); err != nil {
		t.Fatal(err)
	}
	settle()
	srv, _ := w.servers.Observe(owner)
	if srv == nil || srv.Disk != disk.Name || !srv.Spec.Disk || !srv.Spec.RootDisk.IsZero() {
		t.Fatalf("server %+v once the disk is bound: want one that mounts it", srv)
	}
	if got := strings.Join(w.reasons(), ","); got != "CreatingServer" {
		t.Errorf("events %s: want the server's", got)
	}
	if n := len(w.writes()); n != 2 {
		t.Errorf("the disk getting bound, and the server made, wrote %+v", w.writes()[2:])
	}

	srv.State, srv.Detail = backend.StateReady, "Running"
	w.servers.Set(owner, srv)
	settle()
	writes := w.writes()
	if len(writes) != 3 || status(t, w, testVM, "phase") != string(schema.PhaseActive) {
		t.Fatalf("writes %+v, phase %s: want one more, Active", writes, status(t, w, testVM, "phase"))
	}
	if st := status(t, w, testVM, "rootDisk", "phase"); st != "Bound" || status(t, w, testVM, "rootDisk", "capacity") != "40G" {
		t.Errorf("Active status reports the disk %s, capacity %q", st, status(t, w, testVM, "rootDisk", "capacity"))
	}
	if got := status(t, w, testVM, "server", "name"); got != srv.Name {
		t.Errorf("Active status names server %q, want %s", got, srv.Name)
	}
	if after, _ := w.servers.ObserveDisk(owner); after.ID != disk.ID {
		t.Errorf("disk %s became %s", disk.ID, after.ID)
	}
}

// deletedWithDisk is the world of a deleted VM whose server is gone (deletedUnder), and its
// disk, bound at 40G, owned by owner. It returns the world and the VM as a backend.Owner.
func deletedWithDisk(t *testing.T, policy string, owner backend.DiskOwner) (*world, backend.Owner) {
	t.Helper()
	w, vm := deletedUnder(t, policy)
	w.servers.SetDisk(vm, &backend.Disk{Name: "test-vm-rootdisk", ID: "d1", Phase: backend.DiskBound,
		Requested: resource.MustParse("40G"), Capacity: resource.MustParse("40G"), CanGrow: true, Owner: owner})
	return w, vm
}

// deletedUnder is the world of a deleted VM whose server is gone (the case
// delete-without-server), with reclaim policy policy in the API. It returns the world and the
// VM as a backend.Owner.
func deletedUnder(t *testing.T, policy string) (*world, backend.Owner) {
	t.Helper()
	w := newWorld(t, "delete-without-server")
	u := w.vm(t, testVM.Namespace, testVM.Name)
	if err := unstructured.SetNestedField(u.Object, policy, "spec", "rootDiskReclaimPolicy"); err != nil {
		t.Fatal(err)
	}
	if err := w.client.Tracker().Update(vmGVR, u, testVM.Namespace); err != nil {
		t.Fatal(err)
	}
	return w, ownerOf(cachedView(t, u, w.fields))
}

// TestControllerReleasedOnce: the way out of a VM whose disk is kept is taken once, though
// the cache lags the finalizer's removal: a reconcile queued before the cache lets the VM go
// (the server's or the disk's last change) decides nothing, so that DiskRetained is recorded
// once and the finalizer is not written again. (The informer is stopped after its first list,
// so that the cache keeps the VM with its finalizer.)
func TestControllerReleasedOnce(t *testing.T) {
	w, owner := deletedWithDisk(t, "Retain", backend.DiskKept)
	c, r := newDiskController(t, w)
	ctx := start(t, c)
	c.vms.Load().stop()

	c.processNextItem(ctx)
	if fs := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fs) != 0 {
		t.Fatalf("finalizers %v after the first reconcile, want none", fs)
	}
	for range 2 { // the disk's and the server's last changes, say
		c.queue.Add(testVM)
		c.processNextItem(ctx)
	}
	if got := strings.Join(w.reasons(), ","); got != decision.ReasonDiskRetained {
		t.Errorf("events %s, want one %s", got, decision.ReasonDiskRetained)
	}
	if ws := w.writes(); len(ws) != 1 {
		t.Errorf("writes %+v, want the finalizer's removal only", ws)
	}
	r.mu.Lock()
	outcomes := strings.Join(r.outcomes, ",")
	r.mu.Unlock()
	if strings.Contains(outcomes, "error") || strings.Contains(outcomes, "conflict") {
		t.Errorf("outcomes %s, want no error, no conflict", outcomes)
	}
	if d, _ := w.servers.ObserveDisk(owner); d == nil || d.ID != "d1" || d.Deleting {
		t.Errorf("disk %+v, want d1 kept", d)
	}
}

// TestControllerDiskReleaseRefused: in the loop, a refused release keeps the VM and is not
// taken for its release: the VM stays with its finalizer, Terminating with
// DiskReleaseRefused, and once the refusal is lifted the next reconcile (here come early, as
// the VM's next change would bring it) releases the disk and lets the VM go.
func TestControllerDiskReleaseRefused(t *testing.T) {
	w, owner := deletedWithDisk(t, "Retain", backend.DiskOwned)
	w.servers.FailDisks(fmt.Errorf("update claim test-vm-rootdisk: %w: %w", backend.ErrRejected,
		apierrors.NewForbidden(k8sschema.GroupResource{Resource: "persistentvolumeclaims"}, "test-vm-rootdisk", errors.New("denied"))))
	c, _ := newDiskController(t, w)
	ctx := start(t, c)

	c.processNextItem(ctx)
	if fs := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fs) == 0 {
		t.Fatal("the finalizer came off while the VM still owns its disk")
	}
	if reason := status(t, w, testVM, "reason"); reason != decision.ReasonDiskReleaseRefused {
		t.Errorf("reason %s, want %s", reason, decision.ReasonDiskReleaseRefused)
	}

	w.servers.FailDisks(nil)
	c.queue.Add(testVM)
	c.processNextItem(ctx)
	if fs := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fs) != 0 {
		t.Errorf("finalizers %v once the release can go through, want none", fs)
	}
	if d, _ := w.servers.ObserveDisk(owner); d == nil || d.Owner != backend.DiskKept || d.Deleting {
		t.Errorf("disk %+v, want it kept", d)
	}
}

// growthUnderQuota is the world of claim/grow, a VM without a server whose disk of 40G is to
// grow to 50G, under a quota on storage that refuses the growth; with the VM, its owner, the
// disk as the decision sees it and the plan that grows it and makes the server.
func growthUnderQuota(t *testing.T) (*world, schema.VirtualMachine, backend.Owner, *backend.Disk, decision.Plan) {
	t.Helper()
	w := newWorld(t, "claim/grow")
	vm := w.view(t, "claim/grow")
	owner := ownerOf(vm)
	w.servers.SetDisk(owner, &backend.Disk{Name: "test-vm-rootdisk", ID: "d1", Version: "1", Phase: backend.DiskBound,
		Requested: resource.MustParse("40G"), Capacity: resource.MustParse("40G"), CanGrow: true, StorageClass: "standard", Owner: backend.DiskOwned})
	seen, _ := w.servers.ObserveDisk(owner)
	plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: seen, Now: now})
	if plan.Disk == nil || plan.Disk.Op != decision.ExpandDisk || plan.Server == nil || plan.Server.Op != decision.CreateServer {
		t.Fatalf("plan %+v %+v, want the disk grown and a server made", plan.Disk, plan.Server)
	}
	w.servers.FailDisks(fmt.Errorf("update claim test-vm-rootdisk: exceeded quota: requested storage 50G, limited 45G: %w", backend.ErrRejected))
	return w, vm, owner, seen, plan
}

// TestApplyGrowthRefused: a disk's growth the API server refuses (a quota on storage) for a VM
// whose server is gone: the disk keeps its size, the server is made on it all the same, and the
// VM says the growth was refused (Stalled, DiskResizeInfeasible, one Warning quoting the
// refusal), not Failed with no server; decided again on the disk as it is, the growth is asked
// again, refused again, and nothing more is written.
func TestApplyGrowthRefused(t *testing.T) {
	w, vm, owner, seen, plan := growthUnderQuota(t)
	a := w.diskApplier()
	after, err := a.apply(context.Background(), vm, owner, nil, seen, plan)
	if err != nil {
		t.Fatal(err)
	}
	if after == 0 || after > decision.RejectedRetry {
		t.Errorf("looked at again after %v, want within %v: nothing else brings the VM back once the quota allows the growth", after, decision.RejectedRetry)
	}
	if srv, _ := w.servers.Observe(owner); srv == nil {
		t.Errorf("no server: the VM is %s (%s)", status(t, w, testVM, "phase"), status(t, w, testVM, "reason"))
	}
	if d, _ := w.servers.ObserveDisk(owner); d == nil || d.Requested.String() != "40G" || d.Deleting {
		t.Errorf("disk %+v, want it as it was", d)
	}
	stored := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields)
	st := stored.Status()
	// The claim asks for 40G still: the status says so, not the size refused, which would
	// hold rootDisk above the claim's own where the storage rounds a disk up.
	if st.RootDisk == nil || st.RootDisk.Request != "40G" {
		t.Errorf("status.rootDisk %+v, want the request the claim has, 40G", st.RootDisk)
	}
	c := st.Condition(schema.ConditionDiskResizing)
	if st.Phase == schema.PhaseFailed || c == nil || c.Reason != decision.ReasonDiskResizeInfeasible || !strings.Contains(c.Message, "exceeded quota") ||
		st.Condition(schema.ConditionStalled) == nil {
		t.Errorf("status %s %s, DiskResizing %+v, Stalled %+v: want the growth refused, Stalled", st.Phase, st.Reason, c, st.Condition(schema.ConditionStalled))
	}
	if evs := w.events(); !slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "Warning DiskResizeInfeasible ") }) {
		t.Errorf("events %q, want the Warning DiskResizeInfeasible", evs)
	}

	// Decided again on the disk as it is: the growth is asked again, refused, nothing written.
	srv, _ := w.servers.Observe(owner)
	writes := len(w.writes())
	again := decision.DefaultPolicy.Decide(decision.Input{VM: stored, Server: srv, Disk: seen, Now: now})
	if _, err := a.apply(context.Background(), stored, owner, srv, seen, again); err != nil {
		t.Fatal(err)
	}
	if n := len(w.writes()) - writes; n != 0 {
		t.Errorf("%d writes of the VM deciding again, want none", n)
	}
	if evs := w.events(); len(evs) != 0 {
		t.Errorf("events %q deciding again, want none", evs)
	}
}

// TestApplyGrowthAndServerRefused: the growth refused by a quota, and the server the plan then
// makes refused too (a PriorityClass missing, a quota on pods): the status reports both
// refusals, the server's in the phase and the growth's in DiskResizing (Infeasible, quoting
// the quota), not the growth as pending: the refusal of the server was decided on the disk as
// its growth's refusal left it.
func TestApplyGrowthAndServerRefused(t *testing.T) {
	w, vm, owner, seen, plan := growthUnderQuota(t)
	w.servers.FailCreate(fmt.Errorf("create pod: no PriorityClass with name vms was found: %w", backend.ErrRejected))
	if _, err := w.diskApplier().apply(context.Background(), vm, owner, nil, seen, plan); err != nil {
		t.Fatal(err)
	}
	st := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields).Status()
	c := st.Condition(schema.ConditionDiskResizing)
	if st.Reason != decision.ReasonServerRejected || c == nil || c.Reason != decision.ReasonDiskResizeInfeasible || !strings.Contains(c.Message, "exceeded quota") {
		t.Errorf("status %s %s, DiskResizing %+v: want the server refused and the growth refused", st.Phase, st.Reason, c)
	}
}

// TestApplyDiskRefused: a disk the backend refuses (its name another's, or any refusal
// retrying cannot fix) ends the plan there: no server, the VM Failed with the reason, another
// look in a minute; a transient failure is returned for a retry, with nothing written after
// the finalizer.
func TestApplyDiskRefused(t *testing.T) {
	tests := map[string]struct {
		err    error
		reason string // the status's; "" for a transient failure
	}{
		"name taken":  {fmt.Errorf("claim test-vm-rootdisk exists and is not this VM's: %w", backend.ErrDiskConflict), decision.ReasonDiskConflict},
		"quota":       {fmt.Errorf("create claim: exceeded quota: %w", backend.ErrRejected), decision.ReasonDiskRejected},
		"server down": {errors.New("connection refused"), ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "create-new")
			vm := w.view(t, "create-new")
			w.servers.FailDisks(tc.err)
			after, err := w.diskApplier().apply(context.Background(), vm, ownerOf(vm), nil, nil, decision.DefaultPolicy.Decide(decision.Input{VM: vm, Now: now}))
			if srv, _ := w.servers.Observe(ownerOf(vm)); srv != nil {
				t.Errorf("a server was made without its disk: %+v", srv)
			}
			if tc.reason == "" {
				if err == nil || len(w.writes()) != 1 {
					t.Errorf("err %v, writes %+v: want the error, after the finalizer only", err, w.writes())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := status(t, w, testVM, "reason"); got != tc.reason || status(t, w, testVM, "phase") != string(schema.PhaseFailed) {
				t.Errorf("status %s %s, want Failed %s", status(t, w, testVM, "phase"), got, tc.reason)
			}
			if want := time.Duration(decision.DefaultPolicy.DiskRejected(decision.Input{VM: vm, Now: now}, "", false).RequeueAfter); want == 0 || after != want {
				t.Errorf("looked at again after %s, want %s", after, want)
			}
		})
	}
}

// TestApplyDiskDeletion: a deleted VM whose server is gone: its disk is deleted (reclaim
// policy Delete) or kept and no longer owned (Retain) before the finalizer comes off, with an
// Event that names it. A disk that is not the VM's is not touched.
func TestApplyDiskDeletion(t *testing.T) {
	tests := map[string]struct {
		policy string
		owner  backend.DiskOwner
		want   string // the disk afterwards: its owner, and whether it is going
		event  string
	}{
		"delete": {"Delete", backend.DiskOwned, "Owned going", decision.ReasonDeletingDisk},
		"retain": {"Retain", backend.DiskOwned, "Kept", decision.ReasonDiskRetained},
		"kept":   {"Retain", backend.DiskKept, "Kept", decision.ReasonDiskRetained},
		"other":  {"Delete", backend.DiskOther, "Other", ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "delete-without-server")
			vm := w.view(t, "delete-without-server")
			raw, err := jsonpatch.MergePatch(vm.JSON(), fmt.Appendf(nil, `{"spec":{"rootDiskReclaimPolicy":%q}}`, tc.policy))
			if err != nil {
				t.Fatal(err)
			}
			vm = schema.ViewOf(raw, vm.ResourceVersion(), w.fields)
			disk := &backend.Disk{Name: "test-vm-rootdisk", ID: "d1", Phase: backend.DiskBound, Requested: resource.MustParse("40G"),
				Capacity: resource.MustParse("40G"), CanGrow: true, Owner: tc.owner}
			w.servers.SetDisk(ownerOf(vm), disk)
			disk, _ = w.servers.ObserveDisk(ownerOf(vm))
			plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: disk, Now: now})
			if plan.Finalizer != decision.RemoveFinalizer {
				t.Fatalf("plan %+v does not release the VM", plan)
			}
			if _, err := w.diskApplier().apply(context.Background(), vm, ownerOf(vm), nil, disk, plan); err != nil {
				t.Fatal(err)
			}
			after, _ := w.servers.ObserveDisk(ownerOf(vm))
			got := string(after.Owner)
			if after.Deleting {
				got += " going"
			}
			if got != tc.want {
				t.Errorf("disk %s, want %s", got, tc.want)
			}
			if reasons := strings.Join(w.reasons(), ","); reasons != tc.event {
				t.Errorf("events %s, want %s", reasons, tc.event)
			}
			writes := w.writes()
			if len(writes) != 1 || writes[0].subresource != "" {
				t.Errorf("writes %+v, want the finalizer's removal", writes)
			}
		})
	}
}

// TestApplyDiskDeletionChangedSince: the delete of a deleted VM's disk is conditional on the
// disk the decision saw. A disk marked kept between the decision and the delete (the backend
// now shows it kept) is not deleted: the apply step returns the Conflict, so that the VM is
// decided again on the disk as it now is, with no Event and the finalizer still on.
func TestApplyDiskDeletionChangedSince(t *testing.T) {
	w := newWorld(t, "delete-without-server")
	vm := w.view(t, "delete-without-server")
	raw, err := jsonpatch.MergePatch(vm.JSON(), []byte(`{"spec":{"rootDiskReclaimPolicy":"Delete"}}`))
	if err != nil {
		t.Fatal(err)
	}
	vm = schema.ViewOf(raw, vm.ResourceVersion(), w.fields)
	w.servers.SetDisk(ownerOf(vm), &backend.Disk{Name: "test-vm-rootdisk", ID: "d1", Phase: backend.DiskBound,
		Requested: resource.MustParse("40G"), Capacity: resource.MustParse("40G"), CanGrow: true, Owner: backend.DiskOwned})
	seen, _ := w.servers.ObserveDisk(ownerOf(vm))
	plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: seen, Now: now})
	if plan.Disk == nil || plan.Disk.Op != decision.DeleteDisk {
		t.Fatalf("plan %+v does not delete the disk", plan)
	}
	if _, err := w.servers.UpdateDisk(context.Background(), ownerOf(vm), seen, backend.DiskSpec{Size: seen.Requested, Keep: true}); err != nil {
		t.Fatal(err)
	}
	_, err = w.diskApplier().apply(context.Background(), vm, ownerOf(vm), nil, seen, plan)
	if !apierrors.IsConflict(err) {
		t.Errorf("apply: %v, want a Conflict", err)
	}
	if after, _ := w.servers.ObserveDisk(ownerOf(vm)); after == nil || after.Deleting || !after.KeptMark {
		t.Errorf("the disk marked kept after the decision is now %+v", after)
	}
	if reasons := w.reasons(); len(reasons) != 0 {
		t.Errorf("events %v, want none", reasons)
	}
	if writes := w.writes(); len(writes) != 0 {
		t.Errorf("writes %+v, want none: the finalizer stays", writes)
	}
}

// TestApplyDiskUpdateChangedSince: the update of a VM's disk (an adoption, a release) is
// conditional on, and worked out from, the disk the decision saw. A disk changed between the
// decision and the update is not updated on the stale view: an unowned disk the decision
// adopts as owned (so that it would go with the VM) but that has been kept for the VM and
// marked so since stays kept; a disk a deleted VM releases but that another has taken since is
// left to it. The apply step returns the Conflict, so that the VM is decided again on the disk
// as it now is, with no Event and, on the way out, the finalizer still on.
func TestApplyDiskUpdateChangedSince(t *testing.T) {
	tests := map[string]struct {
		patch  string            // to the VM of delete-without-server
		owner  backend.DiskOwner // the disk as the decision saw it
		op     decision.DiskOp
		change func(*backend.Disk) // since
	}{
		"adopt, marked kept since": {`{"metadata":{"deletionTimestamp":null},"spec":{"rootDiskReclaimPolicy":"Delete"}}`, backend.DiskUnowned,
			decision.AdoptDisk, func(d *backend.Disk) { d.Owner, d.KeptMark = backend.DiskKept, true }},
		"release, taken by another since": {`{"spec":{"rootDiskReclaimPolicy":"Retain"}}`, backend.DiskOwned,
			decision.ReleaseDisk, func(d *backend.Disk) { d.Owner = backend.DiskOther }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "delete-without-server")
			vm := w.view(t, "delete-without-server")
			raw, err := jsonpatch.MergePatch(vm.JSON(), []byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			vm = schema.ViewOf(raw, vm.ResourceVersion(), w.fields)
			w.servers.SetDisk(ownerOf(vm), &backend.Disk{Name: "test-vm-rootdisk", ID: "d1", Phase: backend.DiskBound,
				Requested: resource.MustParse("40G"), Capacity: resource.MustParse("40G"), CanGrow: true, Owner: tc.owner})
			seen, _ := w.servers.ObserveDisk(ownerOf(vm))
			plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: seen, Now: now})
			if plan.Disk == nil || plan.Disk.Op != tc.op {
				t.Fatalf("plan %+v, want the disk's %s", plan, tc.op)
			}
			changed := *seen
			tc.change(&changed)
			w.servers.SetDisk(ownerOf(vm), &changed)
			before, _ := w.servers.ObserveDisk(ownerOf(vm))
			_, err = w.diskApplier().apply(context.Background(), vm, ownerOf(vm), nil, seen, plan)
			if !apierrors.IsConflict(err) {
				t.Errorf("apply: %v, want a Conflict", err)
			}
			if after, _ := w.servers.ObserveDisk(ownerOf(vm)); after == nil || after.Version != before.Version || after.Owner != before.Owner || after.KeptMark != before.KeptMark {
				t.Errorf("the disk changed after the decision is now %+v, was %+v", after, before)
			}
			if reasons := w.reasons(); len(reasons) != 0 {
				t.Errorf("events %v, want none", reasons)
			}
			if writes := w.writes(); len(writes) != 0 {
				t.Errorf("writes %+v, want none", writes)
			}
		})
	}
}

// kindUnrecorded is a world of a running VM whose own disk an earlier version made without
// the VM's kind, with the disk as the decision sees it and the plan for it.
func kindUnrecorded(t *testing.T) (*world, schema.VirtualMachine, *backend.Server, *backend.Disk, decision.Plan) {
	t.Helper()
	const name = "active-steady"
	w := newWorld(t, name)
	vm := w.view(t, name)
	owner := ownerOf(vm)
	_, srv := decidecase.Read(t, caseFile(name))
	w.servers.Set(owner, srv)
	w.servers.SetDisk(owner, &backend.Disk{Name: "test-vm-rootdisk", ID: "d1", Phase: backend.DiskBound, Requested: resource.MustParse("40G"),
		Capacity: resource.MustParse("40G"), CanGrow: true, Owner: backend.DiskOwned, KindUnrecorded: true})
	seen, _ := w.servers.ObserveDisk(owner)
	return w, vm, srv, seen, serverPolicy.Decide(decision.Input{VM: vm, Server: srv, Disk: seen, Now: now})
}

// TestApplyDiskRecordsKind: a VM's own disk that an earlier version made without the VM's kind
// (here one left from --root-disk claim, under ephemeral) has it recorded in one update that
// changes nothing else of it, with no Event and no write of the VM. The decision after asks for
// nothing, on the disk as the controller knows it while the cache still shows it as it was
// (the update's expectation) as on the disk as it now is.
func TestApplyDiskRecordsKind(t *testing.T) {
	w, vm, srv, seen, plan := kindUnrecorded(t)
	owner := ownerOf(vm)
	if plan.Disk == nil || plan.Disk.Op != decision.RecordDiskKind || plan.Server != nil || plan.Status != nil || len(plan.Events) != 0 {
		t.Fatalf("plan %+v, want the disk's kind recorded and nothing else", plan)
	}
	a := w.diskApplier()
	a.policy = serverPolicy
	if _, err := a.apply(context.Background(), vm, owner, srv, seen, plan); err != nil {
		t.Fatal(err)
	}
	after, _ := w.servers.ObserveDisk(owner)
	if after == nil || after.KindUnrecorded || after.ID != seen.ID || after.Owner != backend.DiskOwned || after.KeptMark ||
		after.Requested.Cmp(seen.Requested) != 0 {
		t.Errorf("disk %+v, want %s as it was, recording the kind", after, seen.Name)
	}
	if reasons := w.reasons(); len(reasons) != 0 {
		t.Errorf("events %v, want none", reasons)
	}
	if writes := w.writes(); len(writes) != 0 {
		t.Errorf("VM writes %+v, want none", writes)
	}
	known := a.disks.adjust(cache.NewObjectName(owner.Namespace, owner.Name), owner.UID, seen) // the cache behind the update
	for what, d := range map[string]*backend.Disk{"as the update left it": known, "as it now is": after} {
		if next := serverPolicy.Decide(decision.Input{VM: vm, Server: srv, Disk: d, Now: now}); !next.Empty() {
			t.Errorf("deciding again on the disk %s asks for more: %+v", what, next)
		}
	}
}

// TestApplyDiskReleaseRefused: on the way out, a refused release of a disk the VM still owns
// keeps the VM (the garbage collector would delete the disk with it): the finalizer stays, the
// VM is Terminating with DiskReleaseRefused and a Warning, and is looked at again in a minute;
// once the refusal is lifted the disk is released and the VM goes. Any other refusal on the
// way out lets the VM go: a delete refused (the disk stays), a disk the VM no longer owns, a
// name that is another's.
func TestApplyDiskReleaseRefused(t *testing.T) {
	forbidden := apierrors.NewForbidden(k8sschema.GroupResource{Resource: "persistentvolumeclaims"}, "test-vm-rootdisk",
		errors.New(`admission webhook "policy.example.com" denied the request`))
	refused := fmt.Errorf("update claim test-vm-rootdisk: %w: %w", backend.ErrRejected, forbidden)
	tests := map[string]struct {
		policy string
		owner  backend.DiskOwner
		err    error
		stays  bool
	}{
		"retain, owned":            {"Retain", backend.DiskOwned, refused, true},
		"no policy, owned":         {"Sometimes", backend.DiskOwned, refused, true},
		"retain, kept":             {"Retain", backend.DiskKept, refused, false},
		"retain, another's":        {"Retain", backend.DiskOwned, fmt.Errorf("claim test-vm-rootdisk is not this VM's: %w", backend.ErrDiskConflict), false},
		"delete, refused":          {"Delete", backend.DiskOwned, fmt.Errorf("delete claim test-vm-rootdisk: %w: %w", backend.ErrRejected, forbidden), false},
		"retain, owned, transient": {"Retain", backend.DiskOwned, errors.New("connection refused"), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w, _ := deletedWithDisk(t, tc.policy, tc.owner)
			current := func() schema.VirtualMachine { return cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields) }
			vm := current()
			disk, _ := w.servers.ObserveDisk(ownerOf(vm))
			plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: disk, Now: now})
			if plan.Disk == nil || plan.Finalizer != decision.RemoveFinalizer {
				t.Fatalf("plan %+v: want a disk action, then the finalizer off", plan)
			}
			w.servers.FailDisks(tc.err)
			after, err := w.diskApplier().apply(context.Background(), vm, ownerOf(vm), nil, disk, plan)
			fins := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers()
			if stays := len(fins) > 0; stays != tc.stays {
				t.Fatalf("finalizers %v (err %v), want the VM kept: %v", fins, err, tc.stays)
			}
			if !tc.stays {
				return
			}
			if !errors.Is(tc.err, backend.ErrRejected) {
				if err == nil {
					t.Errorf("a transient failure was not returned for a retry")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if phase, reason := status(t, w, testVM, "phase"), status(t, w, testVM, "reason"); phase != string(schema.PhaseTerminating) || reason != decision.ReasonDiskReleaseRefused {
				t.Errorf("status %s %s, want Terminating %s", phase, reason, decision.ReasonDiskReleaseRefused)
			}
			if msg := status(t, w, testVM, "message"); !strings.Contains(msg, "test-vm-rootdisk") || !strings.Contains(msg, "denied the request") {
				t.Errorf("message %q: want the disk and the refusal", msg)
			}
			if ev := strings.Join(w.events(), "\n"); !strings.HasPrefix(ev, "Warning "+decision.ReasonDiskReleaseRefused) {
				t.Errorf("events %q, want a Warning %s", ev, decision.ReasonDiskReleaseRefused)
			}
			if after != time.Minute {
				t.Errorf("looked at again after %s, want a minute", after)
			}
			if d, _ := w.servers.ObserveDisk(ownerOf(vm)); d.Owner != backend.DiskOwned || d.Deleting {
				t.Errorf("disk %+v, want it untouched", d)
			}

			// The refusal lifted: the next decision releases the disk and lets the VM go.
			w.servers.FailDisks(nil)
			vm = current()
			disk, _ = w.servers.ObserveDisk(ownerOf(vm))
			if _, err := w.diskApplier().apply(context.Background(), vm, ownerOf(vm), nil, disk, decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: disk, Now: now})); err != nil {
				t.Fatal(err)
			}
			if fins := w.vm(t, testVM.Namespace, testVM.Name).GetFinalizers(); len(fins) != 0 {
				t.Errorf("finalizers %v once the release went through, want none", fins)
			}
			if d, _ := w.servers.ObserveDisk(ownerOf(vm)); d.Owner != backend.DiskKept || d.Deleting {
				t.Errorf("disk %+v, want it kept", d)
			}
		})
	}
}

// TestDiskExpectations: after an action on a disk, the controller takes the disk as the
// action left it until the cache shows it changed (or the expectation runs out); a cache that
// moved on otherwise is believed at once.
func TestDiskExpectations(t *testing.T) {
	vm := cache.NewObjectName("ns", "vm")
	const uid = types.UID("uid-1")
	disk := func(version string, deleting bool) *backend.Disk {
		return &backend.Disk{Name: "vm-rootdisk", Version: version, Deleting: deleting}
	}
	tests := map[string]struct {
		act      func(e *diskExpectations)
		observed *backend.Disk
		want     string    // the disk adjust returns: its version and whether it goes; "none"
		kept     bool      // the expectation still holds afterwards
		by       types.UID // the VM that asks (adjust); "": the one that acted
	}{
		"created, not seen":      {func(e *diskExpectations) { e.changed(vm, uid, nil, disk("5", false)) }, nil, "5", true, ""},
		"created, seen":          {func(e *diskExpectations) { e.changed(vm, uid, nil, disk("5", false)) }, disk("5", false), "5", false, ""},
		"updated, old seen":      {func(e *diskExpectations) { e.changed(vm, uid, disk("4", false), disk("5", false)) }, disk("4", false), "5", true, ""},
		"updated, seen":          {func(e *diskExpectations) { e.changed(vm, uid, disk("4", false), disk("5", false)) }, disk("5", false), "5", false, ""},
		"updated, moved on":      {func(e *diskExpectations) { e.changed(vm, uid, disk("4", false), disk("5", false)) }, disk("7", false), "7", false, ""},
		"updated, gone":          {func(e *diskExpectations) { e.changed(vm, uid, disk("4", false), disk("5", false)) }, nil, "none", false, ""},
		"deleted, old seen":      {func(e *diskExpectations) { e.deleted(vm, uid, disk("4", false)) }, disk("4", false), "4 going", true, ""},
		"deleted, seen going":    {func(e *diskExpectations) { e.deleted(vm, uid, disk("4", false)) }, disk("6", true), "6 going", false, ""},
		"deleted, gone":          {func(e *diskExpectations) { e.deleted(vm, uid, disk("4", false)) }, nil, "none", false, ""},
		"nothing expected":       {func(*diskExpectations) {}, disk("4", false), "4", false, ""},
		"created, none returned": {func(e *diskExpectations) { e.changed(vm, uid, nil, nil) }, nil, "none", false, ""},
		// A VM made again under the name: the earlier VM's delete holds for it too (its owners
		// are told as the cache tells them to the later VM: TestDiskExpectationsForAnotherVM).
		"deleted, another VM": {func(e *diskExpectations) { e.deleted(vm, uid, disk("4", false)) }, disk("4", false), "4 going", true, "uid-2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			e := newDiskExpectations()
			tc.act(e)
			by := tc.by
			if by == "" {
				by = uid
			}
			got := "none"
			if d := e.adjust(vm, by, tc.observed); d != nil {
				got = d.Version
				if d.Deleting {
					got += " going"
				}
			}
			if got != tc.want {
				t.Errorf("adjusted to %s, want %s", got, tc.want)
			}
			if kept := e.wait(vm) > 0; kept != tc.kept {
				t.Errorf("expectation kept: %v, want %v", kept, tc.kept)
			}
		})
	}
}

// TestApplyDiskNamespaceTerminating: a disk the VM's namespace refuses because it is being
// deleted ends the pass like the server's refusal does (TestNamespaceTerminating): no server,
// no error to retry, no status, no Event.
func TestApplyDiskNamespaceTerminating(t *testing.T) {
	w := newWorld(t, "create-new")
	vm := w.view(t, "create-new")
	terminating := apierrors.NewForbidden(k8sschema.GroupResource{Resource: "persistentvolumeclaims"}, "test-vm-rootdisk",
		errors.New("unable to create new content in namespace default because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace default is being terminated", Field: "metadata.namespace"}}
	w.servers.FailDisks(fmt.Errorf("create claim test-vm-rootdisk: namespace default is being deleted: %w", terminating))
	_, err := w.diskApplier().apply(context.Background(), vm, ownerOf(vm), nil, nil, decision.DefaultPolicy.Decide(decision.Input{VM: vm, Now: now}))
	if err != nil {
		t.Fatalf("err %v, want none", err)
	}
	if srv, _ := w.servers.Observe(ownerOf(vm)); srv != nil {
		t.Errorf("a server was made without its disk: %+v", srv)
	}
	if ws := w.writes(); len(ws) != 1 {
		t.Errorf("writes %+v, want the finalizer's only", ws)
	}
	if evs := w.events(); len(evs) != 0 {
		t.Errorf("events %q", evs)
	}
}

// storageQuota is the memory backend under a quota on storage (a ResourceQuota's
// requests.storage): the API server refuses any change of a claim that asks for more than
// limit, whatever else the change makes, and lets every other change through.
type storageQuota struct {
	*memory.Backend
	limit resource.Quantity
}

func (q storageQuota) UpdateDisk(ctx context.Context, vm backend.Owner, seen *backend.Disk, spec backend.DiskSpec) (*backend.Disk, error) {
	if spec.Size.Cmp(q.limit) > 0 {
		return nil, fmt.Errorf("update claim %s: exceeded quota: requested storage %s, limited %s: %w", seen.Name, spec.Size.String(), q.limit.String(), backend.ErrRejected)
	}
	return q.Backend.UpdateDisk(ctx, vm, seen, spec)
}

// TestApplyOwnerChangeUnderQuota: a change of the disk's owner (reclaim policy Retain set, a
// kept disk adopted) made together with a larger rootDisk, under a quota that refuses the
// growth. The change of owner goes through all the same, and only the growth is refused
// (DiskResizeInfeasible, the VM not Failed, its server made or kept). Sent in one write with
// the growth, the change was refused with it: the disk stayed owned (a foreground deletion of
// the VM then had the garbage collector delete the disk its owner had set to Retain), or was
// never adopted, the VM Failed with no server.
func TestApplyOwnerChangeUnderQuota(t *testing.T) {
	tests := map[string]struct {
		file  string
		disk  backend.Disk
		owner backend.DiskOwner // the disk's once the change is made
	}{
		"Retain set": {file: "claim/retain-set-and-grow", owner: backend.DiskKept,
			disk: backend.Disk{Requested: resource.MustParse("40G"), Capacity: resource.MustParse("40G"), Owner: backend.DiskOwned}},
		"kept disk adopted": {file: "claim/adopt-and-grow", owner: backend.DiskKept,
			disk: backend.Disk{Requested: resource.MustParse("30G"), Capacity: resource.MustParse("30G"), Owner: backend.DiskUnowned}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, tc.file)
			vm := w.view(t, tc.file)
			owner := ownerOf(vm)
			d := tc.disk
			d.Name, d.ID, d.Version, d.Phase, d.CanGrow, d.StorageClass = "test-vm-rootdisk", "d1", "1", backend.DiskBound, true, "standard"
			w.servers.SetDisk(owner, &d)
			a := w.diskApplier()
			a.useBackend(storageQuota{Backend: w.servers, limit: d.Requested})
			_, srv := decidecase.Read(t, caseFile(tc.file))
			if srv != nil {
				w.servers.Set(owner, srv)
			}
			for i := range 3 { // the change, the growth, the growth asked again
				srv, _ := w.servers.Observe(owner)
				seen, _ := w.servers.ObserveDisk(owner)
				stored := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields)
				plan := decision.DefaultPolicy.Decide(decision.Input{VM: stored, Server: srv, Disk: seen, Now: now.Add(time.Duration(i) * time.Minute)})
				if _, err := a.apply(context.Background(), stored, owner, srv, seen, plan); err != nil {
					t.Fatalf("round %d: %v", i, err)
				}
			}
			got, _ := w.servers.ObserveDisk(owner)
			if got == nil || got.Owner != tc.owner || got.Requested.Cmp(d.Requested) != 0 {
				t.Errorf("disk %+v, want it %s at %s", got, tc.owner, d.Requested.String())
			}
			if srv, _ := w.servers.Observe(owner); srv == nil {
				t.Errorf("no server")
			}
			st := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields).Status()
			c := st.Condition(schema.ConditionDiskResizing)
			if st.Phase == schema.PhaseFailed || c == nil || c.Reason != decision.ReasonDiskResizeInfeasible || !strings.Contains(c.Message, "exceeded quota") {
				t.Errorf("status %s %s, DiskResizing %+v: want the growth alone refused", st.Phase, st.Reason, c)
			}
		})
	}
}

// TestApplyAdoptionByVMGone: a plan to adopt a kept disk as the VM's own (reclaim policy
// Delete), decided on a cache that still shows a VM deleted since, whose name a new VM took
// (a new leader's cache, a VM informer behind the claims'). Adopted, the disk would name the
// gone VM as its owner, and the garbage collector would delete it at once. The VM is made sure
// of first (asDecided): the adoption is not made, the disk stays as it is, and the loop decides
// again on the VM as it now is.
func TestApplyAdoptionByVMGone(t *testing.T) {
	for _, made := range []bool{false, true} { // deleted; deleted and made again under the name
		name := "deleted"
		if made {
			name = "made again"
		}
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "claim/adopt-delete")
			stale := w.vm(t, testVM.Namespace, testVM.Name)
			stale.SetFinalizers([]string{schema.Finalizer})
			if err := w.client.Tracker().Update(vmGVR, stale, testVM.Namespace); err != nil {
				t.Fatal(err)
			}
			stale = w.vm(t, testVM.Namespace, testVM.Name)
			vm := cachedView(t, stale, w.fields)
			owner := ownerOf(vm)
			w.servers.SetDisk(owner, &backend.Disk{Name: "test-vm-rootdisk", ID: "d1", Version: "1", Phase: backend.DiskBound, StorageClass: "standard",
				Requested: resource.MustParse("40G"), Capacity: resource.MustParse("40G"), CanGrow: true, Owner: backend.DiskUnowned, KeptMark: true})
			seen, _ := w.servers.ObserveDisk(owner)
			plan := decision.DefaultPolicy.Decide(decision.Input{VM: vm, Disk: seen, Now: now})
			if plan.Disk == nil || plan.Disk.Op != decision.AdoptDisk || plan.Disk.Spec.Keep {
				t.Fatalf("plan %+v, want the disk adopted as the VM's own", plan.Disk)
			}

			// Meanwhile, on the API server: the VM is deleted, and maybe made again.
			if err := w.client.Tracker().Delete(vmGVR, testVM.Namespace, testVM.Name); err != nil {
				t.Fatal(err)
			}
			if made {
				again := stale.DeepCopy()
				again.SetUID("uid-of-the-new-vm")
				again.SetResourceVersion("")
				again.SetFinalizers(nil)
				unstructured.RemoveNestedField(again.Object, "spec", "rootDiskReclaimPolicy")
				if err := w.client.Tracker().Create(vmGVR, again, testVM.Namespace); err != nil {
					t.Fatal(err)
				}
			}
			_, err := w.diskApplier().applyPlan(context.Background(), decision.Input{VM: vm, Disk: seen}, owner, plan)
			if made && !apierrors.IsConflict(err) {
				t.Errorf("apply: %v, want a conflict: the VM at the name is another", err)
			}
			if !made && err != nil {
				t.Errorf("apply: %v, want nothing done and no error: the VM is gone", err)
			}
			if d, _ := w.servers.ObserveDisk(owner); d == nil || d.Owner != backend.DiskUnowned || !d.KeptMark {
				t.Errorf("disk %+v, want it kept as it was", d)
			}
		})
	}
}

// TestApplyGrowthRefusedKeepsEvictionBlocked: a growth a quota refuses, for a VM under Block
// whose budget holds its cordoned node's drain (EvictionBlocked): the status written with the
// refusal keeps the condition. The refusal was decided without the budget, as if the VM had
// none, and each refusal (every RejectedRetry for as long as the quota stood) wrote the
// status without it while the budget still held the drain. It is decided on the budget the
// plan was decided on: a read of the backend's cache at the refusal, which fails or finds the
// cache moved since (the budget's delete seen in between), dropped the condition for one write.
func TestApplyGrowthRefusedKeepsEvictionBlocked(t *testing.T) {
	readFails := errors.New("budget cache unavailable")
	for name, since := range map[string]func(w *world, owner backend.Owner) backend.Backend{
		"budget as decided": func(w *world, _ backend.Owner) backend.Backend { return w.servers },
		"budget gone from the cache since": func(w *world, owner backend.Owner) backend.Backend {
			w.servers.SetBudget(owner, nil)
			return w.servers
		},
		"budget read fails since": func(w *world, _ backend.Owner) backend.Backend {
			return budgetReadFails{Backend: w.servers, err: readFails}
		},
	} {
		t.Run(name, func(t *testing.T) {
			const name = "claim/grow-evict-block-cordoned"
			w := newWorld(t, name)
			vm := w.view(t, name)
			owner := ownerOf(vm)
			_, srv := decidecase.Read(t, caseFile(name))
			w.servers.Set(owner, srv)
			w.servers.SetDisk(owner, &backend.Disk{Name: "test-vm-rootdisk", ID: "d1", Version: "1", Phase: backend.DiskBound,
				Requested: resource.MustParse("40G"), Capacity: resource.MustParse("40G"), CanGrow: true, StorageClass: "standard", Owner: backend.DiskOwned})
			w.servers.SetBudget(owner, &backend.Budget{Name: "test-vm-block-eviction", ID: "pdb-1"})
			seen, _ := w.servers.ObserveDisk(owner)
			budget, _ := w.servers.ObserveBudget(owner)
			in := decision.Input{VM: vm, Server: srv, Disk: seen, Budget: budget, Now: now}
			plan := decision.DefaultPolicy.Decide(in)
			if plan.Disk == nil || plan.Disk.Op != decision.ExpandDisk || plan.Budget != nil {
				t.Fatalf("plan disk %+v budget %+v, want the disk grown and the budget left as it is", plan.Disk, plan.Budget)
			}
			w.servers.FailDisks(fmt.Errorf("update claim test-vm-rootdisk: exceeded quota: %w", backend.ErrRejected))
			a := w.diskApplier()
			a.useBackend(since(w, owner))
			if _, err := a.applyPlan(context.Background(), in, owner, plan); err != nil {
				t.Fatal(err)
			}
			st := cachedView(t, w.vm(t, testVM.Namespace, testVM.Name), w.fields).Status()
			if c := st.Condition(decision.ConditionEvictionBlocked); c == nil || c.Status != schema.ConditionTrue {
				t.Errorf("EvictionBlocked %+v after the growth was refused, want it kept: the budget the plan was decided on holds the drain", c)
			}
			if c := st.Condition(schema.ConditionDiskResizing); c == nil || c.Reason != decision.ReasonDiskResizeInfeasible {
				t.Errorf("DiskResizing %+v, want the growth refused", c)
			}
		})
	}
}

// budgetReadFails is a backend whose cache of budgets cannot be read (ObserveBudget fails).
type budgetReadFails struct {
	*memory.Backend
	err error
}

func (b budgetReadFails) ObserveBudget(backend.Owner) (*backend.Budget, error) { return nil, b.err }

// TestDiskExpectationsForAnotherVM: the disk an action of an earlier VM of the name left (the
// VM deleted, and made again before a reconcile saw the name gone) is told to the later VM as
// the backend tells it once its cache shows the action: one the earlier VM kept is one to
// adopt (Unowned), one it owned is another's (Other), never the later VM's own.
func TestDiskExpectationsForAnotherVM(t *testing.T) {
	vm := cache.NewObjectName("ns", "vm")
	for _, tc := range []struct{ left, acting, later backend.DiskOwner }{
		{backend.DiskKept, backend.DiskKept, backend.DiskUnowned},
		{backend.DiskOwned, backend.DiskOwned, backend.DiskOther},
		{backend.DiskUnowned, backend.DiskUnowned, backend.DiskUnowned},
		{backend.DiskOther, backend.DiskOther, backend.DiskOther},
	} {
		e := newDiskExpectations()
		seen := &backend.Disk{Name: "vm-rootdisk", Version: "4", Owner: backend.DiskOwned}
		e.changed(vm, "uid-1", seen, &backend.Disk{Name: "vm-rootdisk", Version: "5", Owner: tc.left})
		if d := e.adjust(vm, "uid-1", seen); d.Version != "5" || d.Owner != tc.acting {
			t.Errorf("left %s: the VM that acted knows it as %s at %s, want %s at 5", tc.left, d.Owner, d.Version, tc.acting)
		}
		later := &backend.Disk{Name: "vm-rootdisk", Version: "4", Owner: backend.DiskOther} // the cache, behind
		if d := e.adjust(vm, "uid-2", later); d.Version != "5" || d.Owner != tc.later {
			t.Errorf("left %s: a later VM of the name knows it as %s at %s, want %s at 5", tc.left, d.Owner, d.Version, tc.later)
		}
	}
}

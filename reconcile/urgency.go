package reconcile

import (
	"slices"

	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// The loop's queue (package priority) hands out new work before the backlog. What is new
// work, and why each rule:
//
//   - a VM added after the informer's first list: a user created it (or it came back in a
//     relist after a lost watch: created while the watch was down);
//   - a VM of the first list that is not settled (unsettled): never reconciled, deleted, or
//     changed by a user (spec; a restart, start, stop or migration request) while no
//     controller ran, or on its way to a server (Creating); the rest of the list, the
//     backlog, is VMs looked at again because the controller started, almost all with
//     nothing to do;
//   - an update that changes what users change (userChange): the spec, the deletion, the
//     finalizers, a request annotation (schema.RequestAnnotations: a restart, start, stop or
//     migration request, a pause). Status written by someone else is backlog;
//   - a VM deleted from the cache (its reconcile only forgets it);
//   - a server that changed after the servers' first list (the backend's notify): a server
//     that started, failed or went is what a VM on its way to Active, or in trouble, waits
//     for;
//   - a retry or requeue of new work, so that a conflict on the way to Active does not send
//     the VM to the end of the backlog;
//   - a VM whose reconcile ran out of decisions (maxDecisions) with its last write not yet
//     decided on: the rest of a change under way, queued by the reconcile itself, whose
//     writes, noted, are all echoes (left to the last one's echo, a status update, it went
//     to the backlog).
//
// Resyncs and the echoes of the controller's own writes never reach the queue (vmcache.Same,
// echoes); usage writes neither (vmcache.OnlyUsageChanged).
//
// Only the leader queues. A standby that takes over queues its cache as a first list
// (Controller.lead): what it saw while it stood by is told by unsettled alone, a server that
// changed meanwhile is not known, as at a cold start; a VM whose server was on its way is
// Creating, and new work.

// unsettled reports whether a VM of the informer's first list has work a user asked for while
// no controller ran (schema.VirtualMachine.Settled, read when the VM was cached), or is on its
// way to a server (phase Creating): its status observed its generation when the server was
// asked for, and what became of the server since (started, failed), which a standby does not
// queue and a cold start does not know, is what the VM waits for. Such a VM was created or
// changed by a user not long before; in the backlog it would wait behind every settled VM.
func unsettled(o *vmcache.Object) bool { return !o.Settled() || o.Phase() == schema.PhaseCreating }

// userChange reports whether cur differs from old in what a user (or another controller
// acting for one) changes: the generation (the spec), the deletion, the finalizers or a
// request annotation (schema.RequestAnnotations, so that a request added there is counted
// here too).
func userChange(old, cur *vmcache.Object, f schema.Fields) bool {
	a, errA := old.View(f)
	b, errB := cur.View(f)
	if errA != nil || errB != nil {
		return true
	}
	return a.Generation() != b.Generation() || a.Deleting() != b.Deleting() ||
		!slices.Equal(a.Finalizers(), b.Finalizers()) || !a.SameRequests(b)
}

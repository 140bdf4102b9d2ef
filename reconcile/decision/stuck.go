package decision

import (
	"fmt"
	"strings"
	"time"

	"github.com/cloudnative-czs/vm-controller/backend"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// Why a VM is stuck: a pending server whose backend says why it does not start gets a
// reason of its own instead of ServerCreating, with the backend's message (the scheduler's,
// the kubelet's). Neither cause goes away by waiting as a rule (no node grows, a wrong image
// name stays wrong), so a server that waits for one longer than Policy.StalledAfter makes
// the VM Stalled (kstatus.go): GitOps tools then report it failed rather than wait on it.
// The VM stays Creating, and the server is kept: the cause may still go (a node is added,
// the registry comes back), and the VM goes on from there.

// stuckReasons are the VM's reasons for the backend's reasons to wait, and how the status
// message says it.
var stuckReasons = map[backend.WaitReason]struct{ reason, what string }{
	backend.WaitUnschedulable: {ReasonUnschedulable, "cannot be scheduled"},
	backend.WaitImage:         {ReasonImagePullFailing, "cannot pull its image"},
	backend.WaitStart:         {ReasonServerNotStarting, "does not start"},
}

// stuck reports a pending server that waits for a cause the backend names, and says whether
// it did; a server that waits for nothing named is ServerCreating's.
func (p Policy) stuck(d *decision) bool {
	srv := d.srv
	w := srv.Waiting
	why, ok := stuckReasons[w.Reason]
	if !ok {
		return false
	}
	reported, since := d.reportedWait(why.reason)
	if w.Reason == backend.WaitStart {
		// Every server waits so for a moment: named only once past the bound, so that a
		// VM on its way to Active writes nothing for it; looked at again then. The backend
		// gives no words for it: they are made here, once it is named.
		at, ok := p.stalledAt(w)
		if !ok {
			return false
		}
		if d.now.Before(at) && !reported {
			d.requeue(at.Sub(d.now))
			return false
		}
		w.Message = fmt.Sprintf("its containers are not created on node %s (kubectl describe pod %s -n %s shows the node's Events: "+
			"a volume that cannot attach or mount is the usual cause)", srv.Node, srv.Name, d.vm.Namespace())
	}
	msg := fmt.Sprintf("Server %s %s", srv.Name, why.what)
	if w.Message != "" {
		msg += ": " + w.Message
	}
	if w.BackOff && reported {
		// The host only says it waits to try again, most often without the cause the
		// status already gives (the kubelet alternates ErrImagePull, with the cause, and
		// ImagePullBackOff, without): the status keeps its message, and is not rewritten
		// at each of the host's retries.
		msg = d.current.Message
	}
	if w.Since.IsZero() {
		// The backend cannot tell since when (the kubelet's waiting state has no time):
		// the wait began when the status first reported it (reportedWait), or now.
		w.Since = d.now
		if reported {
			w.Since = since
		} else {
			d.cond.waitReported = d.now
		}
	}
	var stalled string
	if at, ok := p.stalledAt(w); ok {
		since := w.Since.UTC().Truncate(time.Second)
		if d.now.Before(at) {
			d.requeue(at.Sub(d.now)) // to say Stalled on time, whatever else happens
		} else {
			// The message says since when, not for how long, so that it stays the same
			// from one decision to the next.
			stalled = fmt.Sprintf("%s; stuck since %s, longer than %s: it will not start without a change",
				strings.TrimSuffix(msg, "."), since.Format(time.RFC3339), p.StalledAfter)
			d.cond.stalled = &lifecycleCondition{why.reason, stalled}
		}
	}
	r := d.report(schema.PhaseCreating, why.reason, msg, srv)
	switch {
	case r.event:
		// A server that does not start is worth a Warning, as the scheduler's
		// FailedScheduling and the kubelet's Failed are. The Stalled condition, if it comes
		// with it, says the rest.
		d.plan.Events[len(d.plan.Events)-1].Type = EventWarning
	case stalled != "" && r.status && !stalledBefore(d.current):
		d.event(EventWarning, ReasonStalled, stalled)
	}
	return true
}

// reportedWait reports whether the current status already reports this server waiting for
// reason, and since when: the transition time of its Ready condition, which report sets to
// the time of the decision that first reports the wait (d.cond.waitReported) when the
// backend cannot tell since when the server waits.
//
// Why the Ready condition holds that time: it is in every status layout (lastUpdateTime is
// not), it is written with the status that first reports the wait, so it costs no write of
// its own (and none on the way to Active, where no server waits), and it stays as it is
// while Ready stays False, through every later write while the server waits (a new message,
// Stalled): SetCondition moves a transition time only when the status changes. A status
// field such as lastUpdateTime moves with each of those writes, which would start the clock
// again. As it is in the status, a decision made again gives the same time, and a
// controller that restarts reads it back rather than starting the clock when it first looks.
// What the pod would say is not there: a container's waiting state has no time, and only
// the pod's Events, which the controller does not watch, have one.
//
// The time is that of the first report, not of the failure: the failure may be older by as
// much as the time between the kubelet's word and the controller's look, which is short
// while the controller watches the pod, so the VM is Stalled no earlier than StalledAfter
// after the wait began.
func (d *decision) reportedWait(reason string) (bool, time.Time) {
	cur := d.current
	if cur.Reason != reason || cur.Server == nil || cur.Server.ID != d.srv.ID {
		return false, time.Time{}
	}
	c := cur.Condition(schema.ConditionReady)
	if c == nil || c.Status != schema.ConditionFalse || c.Reason != reason || c.LastTransitionTime.IsZero() {
		return false, time.Time{}
	}
	return true, c.LastTransitionTime.UTC()
}

// stalledAt is when a server waiting for w's cause is past waiting for (Policy.StalledAfter
// after it began); false when it never is (StalledAfter off, or no start known). A stuck
// server makes the VM Stalled then, and a migration's server ends the move (moveStuck).
func (p Policy) stalledAt(w backend.Waiting) (time.Time, bool) {
	if p.StalledAfter <= 0 || w.Since.IsZero() {
		return time.Time{}, false
	}
	return w.Since.UTC().Truncate(time.Second).Add(p.StalledAfter), true
}

// stuckBeforeDisk reports whether the server's own wait says more than its disk's: a disk
// waiting to be bound (a WaitForFirstConsumer class binds it only once the server is
// scheduled) behind a server that no node takes for another cause than its claim (the
// backend leaves a wait for the claim unnamed). A disk that goes or lost its volume comes
// first: no server can start on it.
func (d *decision) stuckBeforeDisk() bool {
	return d.srv.Waiting.Reason == backend.WaitUnschedulable && d.disk.wait == "" && d.disk.own != nil &&
		!d.disk.own.Deleting && d.disk.own.Phase == backend.DiskPending
}

// stalledBefore reports whether the status already says the VM is stalled.
func stalledBefore(st schema.Status) bool {
	c := st.Condition(schema.ConditionStalled)
	return c != nil && c.Status == schema.ConditionTrue
}

// requeue asks for another look after at most after.
func (d *decision) requeue(after time.Duration) {
	if d.plan.RequeueAfter == 0 || Duration(after) < d.plan.RequeueAfter {
		d.plan.RequeueAfter = Duration(after)
	}
}

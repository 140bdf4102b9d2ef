package reconcile

import (
	"slices"

	"github.com/cloudnative-czs/vm-controller/reconcile/decision"
	"github.com/cloudnative-czs/vm-controller/reconcile/vmcache"
	"github.com/cloudnative-czs/vm-controller/schema"
)

// PhaseReason is a VM's status.phase and status.reason, as ReasonCounts counts VMs by them.
type PhaseReason struct{ Phase, Reason string }

// countedReasons is every phase and reason the decision writes in a VM's status (its
// reports), and NoPhase without a reason, for a VM without a status yet. A reason can come
// with several phases: NodeLost with that of what waits for the lost node (nodelost.go),
// ServerDeleteRefused with a deletion's and a stop's (deleterefused.go). TestCountedReasons
// holds it to what the decision's golden cases write and to the table of phases and reasons
// of docs/reference/phases-reasons-events.md.
var countedReasons = []PhaseReason{
	{string(schema.PhaseCreating), decision.ReasonServerCreating},
	{string(schema.PhaseCreating), decision.ReasonServerStarting},
	{string(schema.PhaseCreating), decision.ReasonServerReplacing},
	{string(schema.PhaseCreating), decision.ReasonWaitingForDisk},
	{string(schema.PhaseCreating), decision.ReasonUnschedulable},
	{string(schema.PhaseCreating), decision.ReasonServerNotStarting},
	{string(schema.PhaseCreating), decision.ReasonImagePullFailing},
	{string(schema.PhaseCreating), decision.ReasonMigrating},
	{string(schema.PhaseCreating), decision.ReasonServerEvicted},
	{string(schema.PhaseCreating), decision.ReasonNodeLost},
	{string(schema.PhaseActive), decision.ReasonServerReady},
	{string(schema.PhaseInactive), decision.ReasonServerStopping},
	{string(schema.PhaseInactive), decision.ReasonServerStopped},
	{string(schema.PhaseInactive), decision.ReasonGuestShutDown},
	{string(schema.PhaseInactive), decision.ReasonStopping},
	{string(schema.PhaseInactive), decision.ReasonStopped},
	{string(schema.PhaseInactive), decision.ReasonNotStarted},
	{string(schema.PhaseInactive), decision.ReasonServerMissing},
	{string(schema.PhaseInactive), decision.ReasonNodeLost},
	{string(schema.PhaseFailed), decision.ReasonInvalidSpec},
	{string(schema.PhaseFailed), decision.ReasonServerFailed},
	{string(schema.PhaseFailed), decision.ReasonServerRejected},
	{string(schema.PhaseFailed), decision.ReasonDiskConflict},
	{string(schema.PhaseFailed), decision.ReasonDiskRejected},
	{string(schema.PhaseFailed), decision.ReasonServerDeleteRefused},
	{string(schema.PhaseTerminating), decision.ReasonServerDeleting},
	{string(schema.PhaseTerminating), decision.ReasonServerDeleteRefused},
	{string(schema.PhaseTerminating), decision.ReasonDiskReleaseRefused},
	{string(schema.PhaseTerminating), decision.ReasonNodeLost},
	{string(schema.PhaseUnknown), decision.ReasonNodeLost},
	{string(schema.PhaseUnknown), decision.ReasonServerStateUnknown},
	{NoPhase, ""},
}

// CountedReasons lists every phase and reason the controller writes in a VM's status, and
// NoPhase with no reason: the pairs a gauge of VMs by reason exports at 0 when no VM has
// them, and the reasons it names. Any other reason was written by someone else (status.reason
// is a free string, which whoever may write the status can set), and a gauge that named it
// would let them make series at will.
func CountedReasons() []PhaseReason { return slices.Clone(countedReasons) }

// ReasonCounts counts the cached VMs by status.phase (NoPhase for a VM without one yet) and
// status.reason ("" for none), each as the VM has it: bounding the reasons someone else wrote
// is the caller's (CountedReasons). It reads what the cache keeps of each VM apart from its
// JSON, as PhaseCounts does, and unpacks none.
func (c *Controller) ReasonCounts() map[PhaseReason]int {
	counts := map[PhaseReason]int{}
	vms := c.vms.Load()
	if vms == nil {
		return counts
	}
	for _, obj := range vms.store.List() {
		if o, ok := obj.(*vmcache.Object); ok {
			p := string(o.Phase())
			if p == "" {
				p = NoPhase
			}
			counts[PhaseReason{p, o.Reason()}]++
		}
	}
	return counts
}

// NoPhase is what PhaseCounts counts a VM without status.phase under.
const NoPhase = "None"

// CountedPhases lists every phase PhaseCounts may count a VM under: each of schema.Phases,
// and NoPhase.
func CountedPhases() []string {
	out := make([]string, 0, len(schema.Phases)+1)
	for _, p := range schema.Phases {
		out = append(out, string(p))
	}
	return append(out, NoPhase)
}

// PhaseCounts counts the cached VMs by status.phase (NoPhase for a VM without one yet): the
// sum over the reasons of ReasonCounts, so that the two gauges count the VMs one way.
func (c *Controller) PhaseCounts() map[string]int {
	counts := map[string]int{}
	for pr, n := range c.ReasonCounts() {
		counts[pr.Phase] += n
	}
	return counts
}

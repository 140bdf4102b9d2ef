package backend

import "time"

// WaitReason is why a server that was asked for does not run yet, in words every backend can
// use: a pod that no node takes and a cloud instance that no zone has room for are both
// unschedulable. The decision turns each into a reason of the VM's own, so that a user reads
// why a VM is stuck instead of a generic "creating".
type WaitReason string

// The reasons a pending server waits.
const (
	// WaitUnschedulable: no host can take the server (too little cpu or memory anywhere,
	// rules no host satisfies). The message is the placer's (for pods: the scheduler's).
	WaitUnschedulable WaitReason = "Unschedulable"
	// WaitImage: the server's image cannot be fetched (a wrong name, a registry that does not
	// answer or refuses). The message is the host's (for pods: the kubelet's).
	WaitImage WaitReason = "ImagePull"
	// WaitStart: the server is placed on its host and does not start there (for pods: bound
	// to a node whose kubelet has not created its containers: a volume that cannot attach or
	// mount, as a disk still attached to a node that stopped answering; a sandbox that cannot
	// be made). Every server waits so for a moment: the decision names it only once it has
	// lasted longer than Policy.StalledAfter. Since is when it was placed.
	WaitStart WaitReason = "Start"
)

// Waiting says why a pending server does not start; the zero value says nothing (it is on its
// way, or the backend cannot tell).
type Waiting struct {
	Reason  WaitReason
	Message string // the backend's own words for it
	// Since is when the server began to wait for this reason, so that a server stuck for
	// longer than a bound can be told apart from one that is only slow; zero: not known, and
	// the decision counts from when it first reported the wait.
	Since time.Time
	// BackOff: the host is waiting to try again, and Message says that much rather than what
	// failed (for pods: the kubelet's ImagePullBackOff, between two ErrImagePull that give
	// the cause). The decision keeps the message it already reports for the server's wait.
	BackOff bool
}

package main

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The expansion of a claim, as a CSI driver's external resizer and then the kubelet carry it
// out in Kubernetes 1.36 (kubernetes-csi/external-resizer's expandAndRecover and resize
// status, and the kubelet's NodeExpander with pkg/volume/util/resize_util.go): the API server
// has let the claim's request grow (its class allows expansion); the resizer records the size
// it works on (status.allocatedResources) with ControllerResizeInProgress and the Resizing
// condition, grows the volume (the PV's capacity), and hands over to the node
// (NodeResizePending, FileSystemResizePending: the file system grows where the volume is
// mounted); the kubelet of a node where a pod mounts the claim marks NodeResizeInProgress,
// grows the file system, and sets the claim's capacity, clearing the resize state and
// conditions. A pod that runs all along keeps running.

const (
	// ExpandAnswerAnnotation on a claim makes the stand-in driver refuse to grow its volume,
	// for tests: with the value Infeasible it answers as a driver whose ControllerExpandVolume
	// fails with OutOfRange (ControllerResizeInfeasible, a ControllerResizeError condition), and
	// does not try again until the annotation or the request changes. Removing it lets the
	// expansion go ahead.
	ExpandAnswerAnnotation = "expand.kwok.cloudnative.czs/answer"
	// answerInfeasible is the ExpandAnswerAnnotation value that refuses.
	answerInfeasible = "Infeasible"
	// hostPathProvisioner is the provisioner of the local cluster's classes
	// (cluster/storage.yaml): only its volumes are this program's to grow.
	hostPathProvisioner = "kubernetes.io/host-path"
	// provisionedBy is the annotation the PV controller puts on a volume it provisioned, with
	// the provisioner's name.
	provisionedBy = "pv.kubernetes.io/provisioned-by"
	// fsResizePendingMessage is the FileSystemResizePending condition's message, as
	// external-resizer writes it.
	fsResizePendingMessage = "Waiting for user to (re-)start a pod to finish file system resize of volume on node."
)

// volumeStep is the next write of the stand-in driver or kubelet for one claim, and when to
// look again: the claim's status or the volume's capacity.
type volumeStep struct {
	what     string                              // what it does, for the log; "" when nothing is to be written
	status   *corev1.PersistentVolumeClaimStatus // the claim's status to write, or nil
	capacity *resource.Quantity                  // the volume's capacity to write, or nil
	after    time.Duration                       // look again after this long; zero: when something changes
}

// expand decides the next step of the expansion of claim, bound to volume, as the driver and
// the kubelet do; mounted tells whether a pod that mounts the claim runs on a node this
// program plays the kubelet of. The driver's work takes actuate from its start. It is pure: the
// caller writes and looks again.
func expand(claim *corev1.PersistentVolumeClaim, volume *corev1.PersistentVolume, mounted bool, now time.Time, actuate time.Duration) volumeStep {
	var none volumeStep
	if claim.Status.Phase != corev1.ClaimBound || volume == nil || volume.Annotations[provisionedBy] != hostPathProvisioner ||
		volume.Spec.ClaimRef == nil || volume.Spec.ClaimRef.UID != claim.UID {
		return none // not bound yet, or not a volume of this driver
	}
	st := *claim.Status.DeepCopy()
	write := func(what string, after time.Duration) volumeStep {
		return volumeStep{what: what, status: &st, after: after}
	}
	want := claim.Spec.Resources.Requests[corev1.ResourceStorage]
	capacity := claim.Status.Capacity[corev1.ResourceStorage]
	size := volume.Spec.Capacity[corev1.ResourceStorage]
	allocated, hasAllocated := claim.Status.AllocatedResources[corev1.ResourceStorage]
	state := claim.Status.AllocatedResourceStatuses[corev1.ResourceStorage]

	switch state {
	case corev1.PersistentVolumeClaimNodeResizePending, corev1.PersistentVolumeClaimNodeResizeInProgress:
		// The kubelet's part, where the volume is mounted; a new request waits for it to end.
		switch {
		case !mounted:
			return none // "waiting for user to (re-)start a pod"
		case state == corev1.PersistentVolumeClaimNodeResizePending:
			setStorageState(&st, corev1.PersistentVolumeClaimNodeResizeInProgress)
			return write("expanding on the node", 0)
		}
		setQuantity(&st.Capacity, size)
		setStorageState(&st, "")
		st.Conditions = resizeConditions(st.Conditions, false)
		return write("expanded", 0)
	}

	// The driver's part.
	if want.Cmp(capacity) <= 0 {
		return none
	}
	refuse := claim.Annotations[ExpandAnswerAnnotation] == answerInfeasible
	working := hasAllocated && allocated.Cmp(want) == 0
	if state != corev1.PersistentVolumeClaimControllerResizeInProgress || !working {
		if state == corev1.PersistentVolumeClaimControllerResizeInfeasible && working && refuse {
			return none // refused; asked again when the answer or the request changes
		}
		setQuantity(&st.AllocatedResources, want)
		setStorageState(&st, corev1.PersistentVolumeClaimControllerResizeInProgress)
		st.Conditions = resizeConditions(st.Conditions, false, corev1.PersistentVolumeClaimCondition{
			Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)})
		return write("expanding", actuate)
	}
	if c := claimCondition(st, corev1.PersistentVolumeClaimResizing); c != nil {
		if wait := c.LastTransitionTime.Add(actuate).Sub(now); wait > 0 {
			return volumeStep{after: wait}
		}
	}
	switch {
	case refuse:
		setStorageState(&st, corev1.PersistentVolumeClaimControllerResizeInfeasible)
		st.Conditions = resizeConditions(st.Conditions, true, corev1.PersistentVolumeClaimCondition{
			Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now),
			Message: fmt.Sprintf("failed to expand pvc with rpc error: code = OutOfRange desc = answered %s by the annotation %s",
				answerInfeasible, ExpandAnswerAnnotation)})
		return write("refused", 0)
	case size.Cmp(want) < 0:
		grown := want.DeepCopy()
		return volumeStep{what: "expanded the volume", capacity: &grown}
	}
	setStorageState(&st, corev1.PersistentVolumeClaimNodeResizePending)
	st.Conditions = resizeConditions(st.Conditions, true, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now),
		Message: fsResizePendingMessage})
	return write("waiting for the node", 0)
}

// setQuantity sets the storage of a list, making the list if there is none.
func setQuantity(l *corev1.ResourceList, q resource.Quantity) {
	if *l == nil {
		*l = corev1.ResourceList{}
	}
	(*l)[corev1.ResourceStorage] = q.DeepCopy()
}

// setStorageState sets the resize state of the claim's storage; "" removes it, and the map
// with it when it is left empty, as the kubelet does when it is done.
func setStorageState(st *corev1.PersistentVolumeClaimStatus, state corev1.ClaimResourceStatus) {
	if state == "" {
		delete(st.AllocatedResourceStatuses, corev1.ResourceStorage)
		if len(st.AllocatedResourceStatuses) == 0 {
			st.AllocatedResourceStatuses = nil
		}
		return
	}
	if st.AllocatedResourceStatuses == nil {
		st.AllocatedResourceStatuses = map[corev1.ResourceName]corev1.ClaimResourceStatus{}
	}
	st.AllocatedResourceStatuses[corev1.ResourceStorage] = state
}

// resizeTypes are the claim conditions of an expansion.
var resizeTypes = map[corev1.PersistentVolumeClaimConditionType]bool{
	corev1.PersistentVolumeClaimResizing:                true,
	corev1.PersistentVolumeClaimFileSystemResizePending: true,
	corev1.PersistentVolumeClaimControllerResizeError:   true,
	corev1.PersistentVolumeClaimNodeResizeError:         true,
}

// resizeConditions merges conditions of an expansion into a claim's as external-resizer's
// MergeResizeConditionsOfPVC does: others stay, one of a type in add is replaced, the other
// expansion conditions stay only if keep, and the rest of add is appended.
func resizeConditions(old []corev1.PersistentVolumeClaimCondition, keep bool, add ...corev1.PersistentVolumeClaimCondition) []corev1.PersistentVolumeClaimCondition {
	var out []corev1.PersistentVolumeClaimCondition
	added := map[corev1.PersistentVolumeClaimConditionType]bool{}
	for _, c := range old {
		if !resizeTypes[c.Type] {
			out = append(out, c)
			continue
		}
		replaced := false
		for _, a := range add {
			if a.Type == c.Type {
				out, replaced, added[a.Type] = append(out, a), true, true
			}
		}
		if !replaced && keep {
			out = append(out, c)
		}
	}
	for _, a := range add {
		if !added[a.Type] {
			out = append(out, a)
		}
	}
	return out
}

// claimCondition is the claim's condition of type t that is True, or nil.
func claimCondition(st corev1.PersistentVolumeClaimStatus, t corev1.PersistentVolumeClaimConditionType) *corev1.PersistentVolumeClaimCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t && st.Conditions[i].Status == corev1.ConditionTrue {
			return &st.Conditions[i]
		}
	}
	return nil
}

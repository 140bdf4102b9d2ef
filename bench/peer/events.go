package main

import (
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// The predicates pass only the events that can change what Reconcile does, so that the
// echoes of the peer's own writes (its finalizer and status patches, its pod create) and the
// cluster's chatter (a pod's binding, kwok's heartbeats) do not each cost a reconcile. Every
// VM still comes back on what matters: its create, a spec change, its deletion, and each pod
// change that moves the VM's phase.

// vmEvents passes a VM's create, delete and generic events, and its updates that change:
var vmEvents = predicate.Or[client.Object](
	// the spec: for a custom resource with a status subresource, the generation moves on a
	// spec change only, not on the peer's own status and finalizer patches;
	predicate.GenerationChangedPredicate{},
	// the deletion: setting deletionTimestamp does not move a custom resource's generation,
	// and it is what starts the pod's delete and, once the pod is gone, the finalizer's release;
	predicate.Funcs{UpdateFunc: deletionStarted},
	// the finalizer, when someone else took it off a VM that still needs it. The echo of the
	// peer's own add has it, so it passes no event: a reconcile on it could find the VM
	// cache before the status written in the same pass and write that status again.
	predicate.Funcs{UpdateFunc: finalizerTaken},
)

func deletionStarted(e event.UpdateEvent) bool {
	return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
}

func finalizerTaken(e event.UpdateEvent) bool {
	return controllerutil.ContainsFinalizer(e.ObjectOld, finalizer) && !controllerutil.ContainsFinalizer(e.ObjectNew, finalizer)
}

// podEvents passes a pod's delete and generic events and the updates that change what
// observe and finalize read: the phase, readiness and deletionTimestamp. A pod's create is
// the echo of the peer's own (only the peer makes these pods), and at start-up each VM's own
// create event reconciles it with its pod from the synced cache. Dropped updates are the
// scheduler's binding, condition times and the like: the VM's status does not read them.
var podEvents = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: podChanged,
}

func podChanged(e event.UpdateEvent) bool {
	old, okOld := e.ObjectOld.(*corev1.Pod)
	pod, okNew := e.ObjectNew.(*corev1.Pod)
	if !okOld || !okNew {
		return true
	}
	return old.Status.Phase != pod.Status.Phase || podReady(old) != podReady(pod) ||
		(old.DeletionTimestamp == nil) != (pod.DeletionTimestamp == nil)
}

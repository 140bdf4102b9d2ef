package main

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
)

// The nodes this program plays the kubelet of, and how a test loses one.

// kwokNodeAnnotation marks the nodes kwok manages (kwokctl scale node sets it; a test's own
// node carries it too).
const kwokNodeAnnotation = "kwok.x-k8s.io/node"

// LostHolder is the holder a test writes into a node's Lease (in kube-node-lease, with a long
// leaseDurationSeconds) to lose the node: its heartbeats stop, as when a machine goes away.
// kwok holds a node's Lease for as long as it plays the node and stops at once when another
// holder has it (it then no longer renews the Lease, nor writes the node's or its pods'
// status), and this program does the same for the node's pods and claims (ours). With no more
// renewals, kube-controller-manager's node lifecycle controller marks the node Ready Unknown
// and taints it node.kubernetes.io/unreachable after --node-monitor-grace-period. Deleting the
// Lease gives the node back: kwok makes a new one and plays the node again.
const LostHolder = "node-lost.kwok.cloudnative.czs"

// lost tells whether a node's Lease says a test has lost the node.
func lost(lease *coordinationv1.Lease) bool {
	return lease != nil && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == LostHolder
}

// ours tells whether this program plays the kubelet of node: kwok manages it and it has not
// been lost.
func (r *resizer) ours(node *corev1.Node) bool {
	if node.Annotations[kwokNodeAnnotation] != "fake" {
		return false // a real kubelet's node
	}
	obj, ok, _ := r.leases.GetIndexer().GetByKey(corev1.NamespaceNodeLease + "/" + node.Name)
	return !ok || !lost(obj.(*coordinationv1.Lease))
}

// node is the node of that name in the cache.
func (r *resizer) node(name string) (*corev1.Node, bool) {
	obj, ok, _ := r.nodes.GetIndexer().GetByKey(name)
	if !ok {
		return nil, false
	}
	return obj.(*corev1.Node), true
}

// enqueueNodeOf looks again at the pods on the node of a Lease that changed, and at the claims
// they mount: when a node is lost or comes back, what this program does for them changes.
func (r *resizer) enqueueNodeOf(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	lease, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	pods, _ := r.pods.GetIndexer().ByIndex(byNode, lease.Name)
	for _, p := range pods {
		r.enqueue(r.podQueue, p)
		r.enqueueClaimsOf(p)
	}
}

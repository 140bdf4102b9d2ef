package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// The claims' side: the expansion steps (decided by expand in expand.go) written to the claim
// or its volume, and which pods mount a claim.

// byClaim indexes pods by the claims they mount, as namespace/name.
const byClaim = "claim"

// podClaims is the byClaim index of a pod.
func podClaims(obj any) ([]string, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	var keys []string
	for _, v := range p.Spec.Volumes {
		if c := v.PersistentVolumeClaim; c != nil {
			keys = append(keys, p.Namespace+"/"+c.ClaimName)
		}
	}
	return keys, nil
}

// handleClaim takes the next step of the expansion of one claim and writes it, on the
// condition that the object written is still the version it was decided on.
func (r *resizer) handleClaim(ctx context.Context, key cache.ObjectName) (time.Duration, error) {
	obj, ok, err := r.claims.GetIndexer().GetByKey(key.String())
	if err != nil || !ok {
		return 0, err
	}
	claim := obj.(*corev1.PersistentVolumeClaim)
	var volume *corev1.PersistentVolume
	if claim.Spec.VolumeName != "" {
		if v, ok, _ := r.volumes.GetIndexer().GetByKey(claim.Spec.VolumeName); ok {
			volume = v.(*corev1.PersistentVolume)
		}
	}
	s := expand(claim, volume, r.mounted(claim), time.Now(), r.actuate)
	switch {
	case s.capacity != nil:
		grown := corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{Capacity: volume.Spec.Capacity.DeepCopy()}}
		setQuantity(&grown.Spec.Capacity, *s.capacity)
		patch, err := versionedPatch(corev1.PersistentVolume{Spec: corev1.PersistentVolumeSpec{Capacity: volume.Spec.Capacity}}, grown, volume.ResourceVersion)
		if err != nil {
			return 0, err
		}
		_, err = r.client.CoreV1().PersistentVolumes().Patch(ctx, volume.Name, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{FieldManager: "kwok-resizer"})
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("write capacity of volume %s: %w", volume.Name, err)
		}
	case s.status != nil:
		patch, err := versionedPatch(corev1.PersistentVolumeClaim{Status: claim.Status}, corev1.PersistentVolumeClaim{Status: *s.status}, claim.ResourceVersion)
		if err != nil {
			return 0, err
		}
		_, err = r.client.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch(ctx, claim.Name, types.StrategicMergePatchType, patch,
			metav1.PatchOptions{FieldManager: "kwok-resizer"}, "status")
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, fmt.Errorf("write status of claim %s: %w", key, err)
		}
	default:
		return s.after, nil
	}
	r.log.Info("Expansion step", "claim", key.String(), "step", s.what)
	return s.after, nil
}

// mounted tells whether the claim is mounted where this program plays the kubelet: a pod that
// uses it is bound to such a node and has not ended (a kubelet mounts a pod's volumes before it
// starts its containers, so a pod still pulling its image counts).
func (r *resizer) mounted(claim *corev1.PersistentVolumeClaim) bool {
	pods, _ := r.pods.GetIndexer().ByIndex(byClaim, claim.Namespace+"/"+claim.Name)
	for _, o := range pods {
		p := o.(*corev1.Pod)
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		if node, ok := r.node(p.Spec.NodeName); ok && r.ours(node) {
			return true
		}
	}
	return false
}

// enqueueClaimsOf looks again at the claims a pod that changed mounts: whether they are
// mounted may have changed.
func (r *resizer) enqueueClaimsOf(obj any) {
	keys, _ := podClaims(obj)
	for _, k := range keys {
		if name, err := cache.ParseObjectName(k); err == nil {
			r.claimQueue.Add(name)
		}
	}
}

// enqueueClaimOf looks again at the claim of a volume that changed.
func (r *resizer) enqueueClaimOf(obj any) {
	if v, ok := obj.(*corev1.PersistentVolume); ok && v.Spec.ClaimRef != nil {
		r.claimQueue.Add(cache.ObjectName{Namespace: v.Spec.ClaimRef.Namespace, Name: v.Spec.ClaimRef.Name})
	}
}

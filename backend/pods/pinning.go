package pods

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
)

var _ backend.DiskPinning = (*Backend)(nil)

// DiskPinned tells whether vm's disk is bound to some nodes: its claim's PersistentVolume is
// a local volume, or its required node affinity names nodes (by kubernetes.io/hostname or by
// name). Such a disk cannot follow its VM to another node, so a migration is refused. A node
// affinity that names a zone or a region only (a cloud's zonal disk) is no pin: the scheduler
// keeps the new server in reach of the disk. Nor is a hostPath volume without a node affinity
// (the in-tree host-path provisioner's, for single-node clusters): Kubernetes itself mounts it
// on any node.
//
// It reads the claim and the volume from the API server, not from a cache: it is asked only
// when a user asks for a migration.
func (b *Backend) DiskPinned(ctx context.Context, vm backend.Owner) (string, error) {
	name := ClaimName(vm.Name)
	pvc, err := b.cfg.Client.CoreV1().PersistentVolumeClaims(vm.Namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read claim %s/%s: %w", vm.Namespace, name, err)
	}
	if pvc.Spec.VolumeName == "" {
		return "", nil // no storage yet: it goes where the next server goes
	}
	pv, err := b.cfg.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read volume %s of claim %s/%s: %w", pvc.Spec.VolumeName, vm.Namespace, name, err)
	}
	return PinnedBy(pv), nil
}

// PinnedBy describes how pv is bound to some nodes (a local volume, or a required node
// affinity naming nodes), or returns "": the rule both the controller and the plugin's
// migrate apply, so that they refuse the same disks.
func PinnedBy(pv *corev1.PersistentVolume) string {
	nodes := pinnedNodes(pv)
	switch {
	case pv.Spec.Local != nil:
		return fmt.Sprintf("its volume %s is a local volume%s", pv.Name, onNodes(nodes))
	case len(nodes) > 0:
		return fmt.Sprintf("its volume %s is bound to %s by its node affinity", pv.Name, strings.Join(nodes, ", "))
	}
	return ""
}

func onNodes(nodes []string) string {
	if len(nodes) == 0 {
		return ""
	}
	return " on " + strings.Join(nodes, ", ")
}

// pinnedNodes lists the nodes pv's required node affinity names, by hostname label or by
// name.
func pinnedNodes(pv *corev1.PersistentVolume) []string {
	na := pv.Spec.NodeAffinity
	if na == nil || na.Required == nil {
		return nil
	}
	var nodes []string
	for _, term := range na.Required.NodeSelectorTerms {
		for _, r := range term.MatchExpressions {
			if r.Key == corev1.LabelHostname && r.Operator == corev1.NodeSelectorOpIn {
				nodes = append(nodes, r.Values...)
			}
		}
		for _, r := range term.MatchFields {
			if r.Key == "metadata.name" && r.Operator == corev1.NodeSelectorOpIn {
				nodes = append(nodes, r.Values...)
			}
		}
	}
	return nodes
}

package pods

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// AnnotationPlacement keeps, on a server pod, the VM's placement the pod was made with (the
// canonical JSON of backend.Placement), absent when it had none. The pod's own fields cannot
// tell it back: admission adds tolerations of its own (DefaultTolerationSeconds) and a
// migration adds a node to avoid, and the decision must compare what the VM asked for with
// what it asked for when the pod was made.
const AnnotationPlacement = "cloudnative.czs/placement"

// place puts spec's placement into pod: the node selector, affinity, tolerations, priority
// class and topology spread constraints as the VM gives them; for a migration, a required
// node affinity that keeps the pod off spec.AvoidNode; after an eviction under Replace, a
// preferred one that keeps it off spec.PreferAvoidNode if another node takes it.
func place(pod *corev1.Pod, spec backend.Spec) {
	if p := spec.Placement; !p.Empty() {
		pod.Annotations[AnnotationPlacement] = p.Canonical()
		// Copied, so that the pod and the spec it came from share nothing.
		if len(p.NodeSelector) > 0 {
			pod.Spec.NodeSelector = make(map[string]string, len(p.NodeSelector))
			for k, v := range p.NodeSelector {
				pod.Spec.NodeSelector[k] = v
			}
		}
		if p.Affinity != nil {
			pod.Spec.Affinity = p.Affinity.DeepCopy()
		}
		for _, t := range p.Tolerations {
			pod.Spec.Tolerations = append(pod.Spec.Tolerations, *t.DeepCopy())
		}
		pod.Spec.PriorityClassName = p.PriorityClassName
		for _, c := range p.TopologySpreadConstraints {
			pod.Spec.TopologySpreadConstraints = append(pod.Spec.TopologySpreadConstraints, *c.DeepCopy())
		}
	}
	if spec.AvoidNode != "" {
		avoid(pod, spec.AvoidNode)
	}
	if spec.PreferAvoidNode != "" {
		preferAvoid(pod, spec.PreferAvoidNode)
	}
}

// avoid keeps pod off the node called node: a required node affinity term matches the node's
// name NotIn [node]. The terms of a required node affinity are ORed, so the requirement goes
// into each of them; a pod without any gets one term of its own.
func avoid(pod *corev1.Pod, node string) {
	req := corev1.NodeSelectorRequirement{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{node}}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
	}
	sel := na.RequiredDuringSchedulingIgnoredDuringExecution
	if len(sel.NodeSelectorTerms) == 0 {
		sel.NodeSelectorTerms = []corev1.NodeSelectorTerm{{}}
	}
	for i := range sel.NodeSelectorTerms {
		sel.NodeSelectorTerms[i].MatchFields = append(sel.NodeSelectorTerms[i].MatchFields, req)
	}
}

// preferAvoid makes the scheduler rank every node but the one called node above it: a
// preferred node affinity term of the greatest weight (100) matches the node's name NotIn
// [node], as avoid's requirement does. Preferred terms are summed, not ORed, so the term is
// added beside the VM's own, which keep their weights; the pod may still land on node when
// no other node fits (the required terms, taints, room).
func preferAvoid(pod *corev1.Pod, node string) {
	term := corev1.PreferredSchedulingTerm{Weight: 100, Preference: corev1.NodeSelectorTerm{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpNotIn, Values: []string{node}}}}}
	if pod.Spec.Affinity == nil {
		pod.Spec.Affinity = &corev1.Affinity{}
	}
	if pod.Spec.Affinity.NodeAffinity == nil {
		pod.Spec.Affinity.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := pod.Spec.Affinity.NodeAffinity
	na.PreferredDuringSchedulingIgnoredDuringExecution = append(na.PreferredDuringSchedulingIgnoredDuringExecution, term)
}

// placementOf is the placement pod was made with, from AnnotationPlacement: nil when it has
// none, or one that does not read (someone edited it), which the decision then takes for no
// placement, so that a VM that asks for one gets a server made with it.
func placementOf(annotation string) *backend.Placement {
	if annotation == "" {
		return nil
	}
	p, err := backend.ParsePlacement([]byte(annotation))
	if err != nil || p.Empty() {
		return nil
	}
	return p
}

// NextServer is a pod that stands, where placement is concerned, for the server that follows
// pod when its VM moves: the placement the VM gave pod (AnnotationPlacement), without what
// admission added (tolerations of its own) or a past migration's node to avoid. `kubectl vm
// migrate` matches nodes against it with the scheduler's own rules before it asks for a move.
func NextServer(pod *corev1.Pod) *corev1.Pod {
	next := &corev1.Pod{}
	next.Annotations = map[string]string{}
	place(next, backend.Spec{Placement: placementOf(pod.Annotations[AnnotationPlacement])})
	return next
}

package pods

import (
	"bytes"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// admittedTolerations are those of tolerations, a pod's, that placement, the one it was made
// with (AnnotationPlacement), does not have: those admission gave it (a namespace's default
// tolerations, a mutating webhook's or policy's; backend.Server.AdmittedTolerations), for a
// pod whose tolerations nobody changed since (tolerationsChanged tells, before this is
// asked). Those of the passing taints are left out:
// DefaultTolerationSeconds gives every pod two (not ready and unreachable, NoExecute, for
// 300 s). Nil when there are none, as for most pods, and when annotation, the pod's
// AnnotationPlacement, is there but does not read (someone edited it): the pod's own
// tolerations cannot then be told from admission's, and counting the placement's as
// admission's would keep counting them after the VM's placement drops them. What it returns
// is its own copy.
func admittedTolerations(tolerations []corev1.Toleration, annotation string, placement *backend.Placement) []corev1.Toleration {
	if annotation != "" && placement == nil {
		return nil
	}
	var out []corev1.Toleration
	for i := range tolerations {
		t := &tolerations[i]
		if backend.PassingTaint(t.Key) {
			continue
		}
		if placement != nil && slices.ContainsFunc(placement.Tolerations, func(o corev1.Toleration) bool { return sameToleration(&o, t) }) {
			continue
		}
		out = append(out, *t.DeepCopy())
	}
	return out
}

// fieldTolerations is how a pod's managedFields name spec.tolerations (FieldsV1: a JSON
// object keyed "f:" and the field's name), an atomic list, so owned as a whole.
var fieldTolerations = []byte(`"f:tolerations"`)

// tolerationsChanged reports whether someone other than the controller changed the
// tolerations of pod after it was made: in its managedFields, a field manager other than the
// controller's (fieldManager) owns spec.tolerations, in an entry of the pod itself (a
// subresource's, such as the status's, never changes them).
//
// Why that tells: the API server computes a create's managedFields before mutating admission
// runs, so the tolerations admission adds at the create (a namespace's defaults, a webhook's
// or policy's, those of DefaultTolerationSeconds) are owned by the controller's entry when its
// create set any (the list is atomic: its entry owns the whole list), and by none when it set
// none.
// An update or patch by another client that changes the list (kubectl patch, kubectl edit)
// moves the whole list to that client's manager, since an update always takes the fields it
// changes from the others. A mutating admission at such an update is not seen, nor a change
// by a client that names itself vm-controller; a pod without managedFields (stripped, or left
// out of one too large to store) reads as not changed.
//
// Tolerations owned by ancientChanges, which may be the create's entry folded in, read as
// changed, unlike the image's (imageChanged): here that guess is the one that ends no running
// server. A server whose tolerations changed has none counted as admission's, so the room
// check (the decision's noRoom) and `kubectl vm migrate` count fewer nodes for the next
// server, and keep the running one when none of those has room; counted, tolerations someone
// added by hand could send it to a node its next server cannot have.
func tolerationsChanged(managed []metav1.ManagedFieldsEntry) bool {
	for i := range managed {
		e := &managed[i]
		if e.Manager != fieldManager && e.Subresource == "" && e.FieldsV1 != nil && bytes.Contains(e.FieldsV1.Raw, fieldTolerations) {
			return true
		}
	}
	return false
}

// sameToleration reports whether a and b take the same taints: the same key, value and effect,
// and the same operator, an empty one read as Equal (its default), so that a mutating policy
// that writes the default out does not make the placement's own toleration look like
// admission's. tolerationSeconds is no part of which nodes take a server.
func sameToleration(a, b *corev1.Toleration) bool {
	op := func(t *corev1.Toleration) corev1.TolerationOperator {
		if t.Operator == "" {
			return corev1.TolerationOpEqual
		}
		return t.Operator
	}
	return a.Key == b.Key && a.Value == b.Value && a.Effect == b.Effect && op(a) == op(b)
}

// NextServer is a pod that stands, where placement is concerned, for the server that follows
// pod when its VM moves: the placement the VM gave pod (AnnotationPlacement) and the
// tolerations admission gave pod beyond it (admittedTolerations), which admission gives the
// next server too, none when someone changed pod's tolerations since it was made
// (tolerationsChanged); without those of the passing taints, which it gives every pod for a
// while, or a past migration's node to avoid. `kubectl vm migrate` matches nodes against it
// with the scheduler's own rules before it asks for a move.
func NextServer(pod *corev1.Pod) *corev1.Pod {
	next := &corev1.Pod{}
	next.Annotations = map[string]string{}
	annotation := pod.Annotations[AnnotationPlacement]
	placement := placementOf(annotation)
	place(next, backend.Spec{Placement: placement})
	if !tolerationsChanged(pod.ManagedFields) {
		next.Spec.Tolerations = append(next.Spec.Tolerations, admittedTolerations(pod.Spec.Tolerations, annotation, placement)...)
	}
	return next
}

package pods

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// Labels on every server pod.
const (
	// LabelVMUID selects the pods of one VM incarnation; its presence selects them all.
	LabelVMUID = "cloudnative.czs/vm-uid"
	// LabelVM names the VM (when the name fits a label value), for kubectl users.
	LabelVM = "cloudnative.czs/vm"
	// ContainerName is the name of the server's container.
	ContainerName = "server"
	// AnnotationVM names the VM in full (a label value cannot hold every name), so that a pod
	// whose owner reference is gone still leads back to its VM.
	AnnotationVM = "cloudnative.czs/vm"
	// AnnotationRestart marks a pod created to carry out a restart request with the request's
	// value (backend.Spec.Restart), the VM's annotation of the same name as the decision acted
	// on it. Pods made for no request, and those made before the mark existed, have none.
	AnnotationRestart = "cloudnative.czs/restartedAt"
)

// The VM's disk in its server pod.
const (
	// DiskVolume is the name of the pod's volume of its VM's disk (its claim).
	DiskVolume = "rootdisk"
	// DiskMountPath is where the server's container mounts its VM's disk.
	DiskMountPath = "/var/lib/vm/rootdisk"
)

const (
	nameSuffix  = "-server"
	claimSuffix = "-rootdisk"
)

// PodName is the name of the pod that serves the VM called vm. Names too long for the suffix
// are cut and made unique again with a hash of the whole name.
func PodName(vm string) string { return nameFor(vm, nameSuffix) }

// ClaimName is the name of the PersistentVolumeClaim that is the disk of the VM called vm, by
// the rules of PodName.
func ClaimName(vm string) string { return nameFor(vm, claimSuffix) }

// nameFor is vm with suffix, cut and made unique with a hash of vm where it would be too long
// for an object's name.
func nameFor(vm, suffix string) string {
	if len(vm)+len(suffix) <= validation.DNS1123SubdomainMaxLength {
		return vm + suffix
	}
	sum := sha256.Sum256([]byte(vm))
	h := hex.EncodeToString(sum[:])[:10]
	keep := validation.DNS1123SubdomainMaxLength - len(suffix) - len(h) - 1
	return strings.TrimRight(vm[:keep], "-.") + "-" + h + suffix
}

// labelsFor are the labels of vm's pod and claim: its UID, which selects them, its name where
// it fits a label value, and who manages them.
func labelsFor(vm backend.Owner) map[string]string {
	labels := map[string]string{LabelVMUID: string(vm.UID), "app.kubernetes.io/managed-by": "vm-controller"}
	if len(validation.IsValidLabelValue(vm.Name)) == 0 {
		labels[LabelVM] = vm.Name
	}
	return labels
}

// controllerRef is the owner reference that makes vm the controller of one of its objects.
func controllerRef(vm backend.Owner) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: vm.APIVersion, Kind: vm.Kind, Name: vm.Name, UID: vm.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
}

// newPod builds the pod for vm: with spec.Disk, one that mounts vm's claim (ClaimName) at
// DiskMountPath and asks for no ephemeral storage; otherwise ephemeral storage of rootDisk.
func newPod(vm backend.Owner, spec backend.Spec) *corev1.Pod {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    spec.CPU,
		corev1.ResourceMemory: spec.Memory,
	}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	if spec.Disk {
		volumes = []corev1.Volume{{Name: DiskVolume, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: ClaimName(vm.Name)}}}}
		mounts = []corev1.VolumeMount{{Name: DiskVolume, MountPath: DiskMountPath}}
	} else {
		res[corev1.ResourceEphemeralStorage] = spec.RootDisk
	}
	pod := &corev1.Pod{
		TypeMeta: podType,
		ObjectMeta: metav1.ObjectMeta{
			Name:            PodName(vm.Name),
			Namespace:       vm.Namespace,
			Labels:          labelsFor(vm),
			Annotations:     map[string]string{AnnotationVM: vm.Name},
			OwnerReferences: []metav1.OwnerReference{controllerRef(vm)},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:         ContainerName,
				Image:        spec.Image,
				Resources:    corev1.ResourceRequirements{Requests: res, Limits: res.DeepCopy()},
				VolumeMounts: mounts,
			}},
			Volumes:                      volumes,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
		},
	}
	if spec.Restart != "" {
		pod.Annotations[AnnotationRestart] = spec.Restart
	}
	madeFor(pod, spec)
	place(pod, spec)
	return pod
}

// serverOf reads a pod as a backend.Server, as far as the pod itself tells (its node's
// readiness is cachedPod.observed's), its spec the one it was made for where admission
// rewrote it (madefor.go).
func serverOf(pod *corev1.Pod) backend.Server {
	s := backend.Server{
		Name:     pod.Name,
		ID:       string(pod.UID),
		Version:  pod.ResourceVersion,
		Detail:   string(pod.Status.Phase),
		Deleting: pod.DeletionTimestamp != nil,
		Resize:   resizeOf(pod),
		Node:     pod.Spec.NodeName,
		IP:       pod.Status.PodIP,
	}
	s.Disruption = disruptionOf(pod)
	for _, v := range pod.Spec.Volumes {
		if v.Name == DiskVolume && v.PersistentVolumeClaim != nil {
			s.Disk = v.PersistentVolumeClaim.ClaimName
		}
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != ContainerName {
			continue
		}
		s.Spec = backend.Spec{
			// A limit, else the request: a policy that drops cpu limits leaves the request,
			// which is what the pod was made with.
			CPU:      limitOrRequest(c.Resources, corev1.ResourceCPU),
			Memory:   limitOrRequest(c.Resources, corev1.ResourceMemory),
			RootDisk: quantity(c.Resources.Limits, corev1.ResourceEphemeralStorage),
			Image:    c.Image,
			Disk:     s.Disk != "",
			// The placement it was made with: placement.go.
			Placement: placementOf(pod.Annotations[AnnotationPlacement]),
			Restart:   pod.Annotations[AnnotationRestart],
		}
		// The image and resources it was made for, where admission changed them: madefor.go.
		asMadeFor(&s, pod)
	}
	if s.TolerationsChanged = tolerationsChanged(pod.ManagedFields); !s.TolerationsChanged {
		s.AdmittedTolerations = admittedTolerations(pod.Spec.Tolerations, pod.Annotations[AnnotationPlacement], s.Spec.Placement)
	}
	switch phaseOf(pod) {
	case corev1.PodPending, "":
		s.State = backend.StatePending
		s.Waiting, s.Message = waitingOf(pod)
	case corev1.PodRunning:
		s.State = backend.StateStarting
		if condition(pod, corev1.PodReady) == corev1.ConditionTrue {
			s.State = backend.StateReady
		}
	case corev1.PodSucceeded:
		s.State, s.Since, s.Message = backend.StateStopped, finishedAt(pod), terminatedMessage(pod)
	case corev1.PodFailed:
		s.State, s.Since, s.Message = backend.StateFailed, finishedAt(pod), terminatedMessage(pod)
	default: // Unknown: the kubelet cannot be reached
		s.State, s.Message = backend.StateLost, pod.Status.Message
	}
	// Ended by its server container while another keeps the pod Running (phaseOf): the pod
	// holds its node, and a drain's eviction asks the VM's budget about it as about a
	// running server. A Pending one is evicted without the budget, as one that never ran.
	s.Lingers = (s.State == backend.StateStopped || s.State == backend.StateFailed) && pod.Status.Phase == corev1.PodRunning
	if s.Lingers {
		s.KeptBy = keepers(pod)
	}
	return s
}

// keepers are the containers that keep running a pod whose server container has ended (a
// server that lingers): every other one that has not terminated, native sidecars (init
// containers with restartPolicy Always) among them, in order of name. Nil when none is
// reported (a status the kubelet has yet to write again).
//
// One that waits counts as much as one that runs: a sidecar that restarts, or crash-loops,
// waits between its runs and keeps the pod Running all the while; naming only the running
// ones would flip the VM's message, and write its status, with each restart. The order is
// the names', not the status's (which the kubelet does not promise), so that the same
// containers give the same server; one order for both kinds, since what the VM says of them
// does not tell them apart.
func keepers(pod *corev1.Pod) []string {
	var names []string
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range statuses {
			if cs.Name != ContainerName && (cs.State.Running != nil || cs.State.Waiting != nil) {
				names = append(names, cs.Name)
			}
		}
	}
	slices.Sort(names)
	return names
}

// phaseOf is the phase a pod is read by: its own, unless the server container has ended.
//
// A pod ends when all its containers have, so one whose server has ended may stay Running
// for as long as another container runs: a sidecar that a mesh or a logging agent injected
// (a regular container, which nothing stops when the server does). With restartPolicy Never
// the server will not run again, so the pod reads as it would once that sidecar ended too:
// Succeeded when the server exited 0, Failed otherwise, whatever the pod's phase says, and
// whatever its readiness says meanwhile. Without it the VM's server would read Starting or
// Ready for ever and its run strategy would never see it end. Native sidecars (init
// containers with restartPolicy Always) are stopped by the kubelet once the server has
// ended; until then the pod reads as ended too.
//
// For the same reason a pod that ended Failed only because a sidecar failed (an
// OOMKilled proxy) while the server exited 0 reads Succeeded, as it would without the
// sidecar. Not when the pod has a reason of its own (Evicted, a node's shutdown): something
// outside the containers ended it, and a server that exited 0 on the way out did not shut
// down by itself. Nor in phase Unknown, whose container states are as old as the kubelet's
// last word.
func phaseOf(pod *corev1.Pod) corev1.PodPhase {
	phase := pod.Status.Phase
	t := serverTerminated(pod)
	switch {
	case t == nil || phase == corev1.PodUnknown || phase == corev1.PodFailed && pod.Status.Reason != "":
		return phase
	case t.ExitCode == 0:
		return corev1.PodSucceeded
	}
	return corev1.PodFailed
}

// serverTerminated is the server container's terminated state, nil while it has not ended.
func serverTerminated(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == ContainerName {
			return cs.State.Terminated
		}
	}
	return nil
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) resource.Quantity {
	if q, ok := l[name]; ok {
		return q
	}
	return resource.Quantity{}
}

func condition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// terminatedMessage says how a pod ended: the pod's own reason and message first, when the
// pod has them, then how its containers ended.
//
// The pod's reason is the cause when something outside the containers ended the pod: a
// kubelet's eviction under node pressure (Evicted), a node's shutdown (Terminated), a node
// that could not admit it (OutOfcpu, NodeAffinity, ...). The containers' states are then only
// the aftermath: an evicted container reads ContainerStatusUnknown, exit code 137, which says
// nothing of memory pressure. So the pod's words lead, the container's detail follows.
//
// The detail is the server container's, read by its name: another container (a sidecar
// something injected) may have ended otherwise. A server that never ran because an init
// container failed has none; that init container's is given instead.
func terminatedMessage(pod *corev1.Pod) string {
	var parts []string
	if pod.Status.Reason != "" {
		cause := pod.Status.Reason
		if m := strings.TrimSpace(pod.Status.Message); m != "" {
			cause += ": " + strings.TrimSuffix(m, ".")
		}
		parts = append(parts, cause)
	} else if m := strings.TrimSpace(pod.Status.Message); m != "" {
		parts = append(parts, strings.TrimSuffix(m, "."))
	}
	if name, t := endedContainer(pod); t != nil {
		detail := strings.TrimSpace(fmt.Sprintf("%s, exit code %d %s", t.Reason, t.ExitCode, t.Message))
		switch {
		case name != ContainerName:
			detail = "init container " + name + ": " + detail
		case len(parts) > 0:
			detail = "the server: " + detail
		}
		parts = append(parts, detail)
	}
	return strings.Join(parts, "; ")
}

// endedContainer is the container whose end says how the server ended, and its terminated
// state: the server container's, else that of an init container that failed (exit code not
// 0: those that completed are not why the pod ended); nil when none ended.
func endedContainer(pod *corev1.Pod) (string, *corev1.ContainerStateTerminated) {
	if t := serverTerminated(pod); t != nil {
		return ContainerName, t
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
			return cs.Name, t
		}
	}
	return "", nil
}

// finishedAt is when a pod ended: the finish time of the container that says how it ended
// (endedContainer), else when it stopped being ready, else when it started.
func finishedAt(pod *corev1.Pod) time.Time {
	if _, t := endedContainer(pod); t != nil && !t.FinishedAt.IsZero() {
		return t.FinishedAt.UTC()
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && !c.LastTransitionTime.IsZero() {
			return c.LastTransitionTime.UTC()
		}
	}
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.UTC()
	}
	return pod.CreationTimestamp.UTC()
}

package pods

import (
	"fmt"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cloudnative-czs/vm-controller/backend"
)

// TestCachedPodReadsBack: for a pod in every state serverOf tells apart, and quantities in every
// form, the cached pod makes exactly the server serverOf makes of the pod (quantities of the
// same value, format and text), and answers for the pod's identity as the pod does; both for
// the pod as built and as the informer decodes it from protobuf. Pods in the API server's
// usual form are kept in the compact fields alone; the rest partly as read.
func TestCachedPodReadsBack(t *testing.T) {
	const (
		podUID = "0b6f1c1e-5d5e-4c6a-9d7e-1a2b3c4d5e6f"
		vmUID  = "7c433542-8907-45fe-887a-7813523dba9e"
	)
	started := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC))
	finished := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC))
	now := metav1.NewTime(time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC))
	ready := func(s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodReady, Status: s, LastTransitionTime: started}
	}
	running := func(p *corev1.Pod) {
		p.Status.Phase, p.Status.StartTime = corev1.PodRunning, &started
		p.Status.Conditions = []corev1.PodCondition{ready(corev1.ConditionTrue)}
	}
	// inEffect has the kubelet report cpu and memory in effect (as written: "" leaves one out).
	inEffect := func(cpu, memory string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			running(p)
			res := corev1.ResourceRequirements{Limits: corev1.ResourceList{}, Requests: corev1.ResourceList{}}
			for name, q := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory} {
				if q != "" {
					res.Limits[name], res.Requests[name] = resource.MustParse(q), resource.MustParse(q)
				}
			}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, Ready: true, Resources: &res,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}}
		}
	}
	// resizing is a running pod whose spec asks for 3 cpus while 2 are in effect.
	resizing := func(conditions ...corev1.PodCondition) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			inEffect("2", "4Gi")(p)
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("3")
			p.Generation, p.Status.ObservedGeneration = 2, 2
			p.Status.Conditions = append(p.Status.Conditions, conditions...)
		}
	}
	terminated := func(phase corev1.PodPhase, reason string, code int32, message string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			p.Status.Phase, p.Status.StartTime = phase, &started
			p.Status.Conditions = []corev1.PodCondition{ready(corev1.ConditionFalse)}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{Reason: reason, ExitCode: code, Message: message, StartedAt: started, FinishedAt: finished}}}}
		}
	}
	// lingering is a pod whose server ended with code while the sidecars named keep it
	// Running, the first of them waiting to run again, the rest running; native says the
	// first is a native sidecar (an init container).
	lingering := func(code int32, native bool, sidecars ...string) func(*corev1.Pod) {
		return func(p *corev1.Pod) {
			terminated(corev1.PodRunning, "Completed", code, "")(p)
			for i, name := range sidecars {
				cs := corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}}
				if i == 0 {
					cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 5m0s"}}
				}
				if i == 0 && native {
					p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses, cs)
				} else {
					p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, cs)
				}
			}
		}
	}
	tests := map[string]struct {
		limits []string          // cpu, memory, rootDisk as written ("" leaves one out); nil: 1500m, 1Gi, 1G
		made   string            // AnnotationResources; "": none, as on a pod made before it
		edit   func(*corev1.Pod) // the pod's state
		exact  bool              // some part of the pod is kept as read
	}{
		"pending":      {edit: func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }},
		"no phase yet": {edit: func(p *corev1.Pod) {}},
		"unschedulable": {edit: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: "Unschedulable", Message: "0/100 nodes are available: 100 Insufficient cpu."}}
		}},
		"container waiting": {edit: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image"}}}}
		}},
		"unschedulable since": {edit: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
				Reason: "Unschedulable", Message: "0/3 nodes are available: 3 Insufficient cpu.", LastTransitionTime: started}}
		}},
		"image pull failing": {edit: func(p *corev1.Pod) {
			p.Status.Phase, p.Status.StartTime, p.Status.PodIP = corev1.PodPending, &started, "10.0.0.7"
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull", Message: "no such host"}}}}
		}},
		"pod IP":      {edit: func(p *corev1.Pod) { running(p); p.Status.PodIP = "10.244.1.17" }},
		"pod IPv6":    {edit: func(p *corev1.Pod) { running(p); p.Status.PodIP = "fd00:10:244::11" }},
		"odd pod IP":  {edit: func(p *corev1.Pod) { running(p); p.Status.PodIP = "010.244.1.17" }, exact: true},
		"pod IP text": {edit: func(p *corev1.Pod) { running(p); p.Status.PodIP = "FD00::1" }, exact: true},
		"container creating": {edit: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		}},
		"container creating on its node": {edit: func(p *corev1.Pod) {
			p.Status.Phase, p.Spec.NodeName = corev1.PodPending, "node-a"
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: started},
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse}}
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}
		}},
		"running not ready": {edit: func(p *corev1.Pod) {
			running(p)
			p.Status.Conditions = []corev1.PodCondition{ready(corev1.ConditionFalse)}
		}},
		"ready":                          {edit: running},
		"ready, resources in effect":     {edit: inEffect("1500m", "1Gi")},
		"ready, in effect as 1073741824": {edit: inEffect("1500m", "1073741824")},
		"ready, in effect as 1500e-3":    {edit: inEffect("1500e-3", "1Gi")},
		"succeeded":                      {edit: terminated(corev1.PodSucceeded, "Completed", 0, "")},
		"failed":                         {edit: terminated(corev1.PodFailed, "Error", 3, "out of disk")},
		"evicted": {edit: func(p *corev1.Pod) {
			p.Status.Phase, p.Status.Reason, p.Status.Message = corev1.PodFailed, "Evicted", "The node was low on resource: memory."
			p.Status.StartTime = &started
		}},
		"failed before it started": {edit: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }},
		// Ended while sidecars keep the pod Running: the names of what keeps it are kept
		// compact too, for a fleet of such pods (ended Once VMs in a mesh) would otherwise
		// each be kept as read.
		"ended, a sidecar keeps it":  {edit: lingering(0, false, "istio-proxy")},
		"failed, sidecars keep it":   {edit: lingering(1, true, "vault-agent", "log-agent", "istio-proxy")},
		"ended, no sidecar reported": {edit: lingering(0, false)},
		"unknown phase": {edit: func(p *corev1.Pod) {
			running(p)
			p.Status.Phase, p.Status.Message = corev1.PodUnknown, "kubelet unreachable"
		}},
		"deleting": {edit: func(p *corev1.Pod) {
			running(p)
			p.DeletionTimestamp = &now
		}},
		"deleting pending": {edit: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.DeletionTimestamp = &now
		}},
		"resize pending, not seen yet": {edit: func(p *corev1.Pod) {
			inEffect("1500m", "1Gi")(p)
			p.Generation, p.Status.ObservedGeneration = 2, 1
		}},
		"resize pending, in effect differs": {edit: resizing()},
		"resize pending, answer to an earlier one": {edit: resizing(corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonDeferred, Message: "earlier", ObservedGeneration: 1})},
		"resize deferred": {edit: resizing(corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonDeferred, Message: "Node didn't have enough capacity: cpu, requested: 3000, capacity: 2000", ObservedGeneration: 2})},
		"resize infeasible": {edit: resizing(corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonInfeasible, Message: "Node didn't have enough capacity"})},
		"resize in progress": {edit: resizing(corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue})},
		"resize in progress, failing": {edit: resizing(corev1.PodCondition{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue,
			Reason: corev1.PodReasonError})},
		"resize done": {edit: func(p *corev1.Pod) {
			inEffect("3", "4Gi")(p)
			p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU] = resource.MustParse("3")
			p.Generation, p.Status.ObservedGeneration = 2, 2
		}},

		// Quantities as they may be written.
		"0.5, 100Mi, 1G":          {limits: []string{"0.5", "100Mi", "1G"}, edit: inEffect("0.5", "100Mi")},
		"2000m, 1024Mi, 40e9":     {limits: []string{"2000m", "1024Mi", "40e9"}, edit: inEffect("2", "1Gi")},
		"absent limits":           {limits: []string{"", "", ""}, edit: running},
		"absent limit, in effect": {limits: []string{"", "1Gi", ""}, edit: inEffect("250m", "1Gi")},
		"zero":                    {limits: []string{"0", "0", "0"}, edit: running},
		"+1Gi":                    {limits: []string{"1500m", "+1Gi", "1G"}, edit: running, exact: true},
		"1E3":                     {limits: []string{"1500m", "1Gi", "1E3"}, edit: running, exact: true},
		"a fraction of a byte":    {limits: []string{"1500m", "1.5", "1G"}, edit: running, exact: true},
		"a microcore":             {limits: []string{"100u", "1Gi", "1G"}, edit: running, exact: true},
		"in effect as +1Gi":       {edit: inEffect("1500m", "+1Gi")},

		// Made for other resources than admission gave it (madefor.go).
		"made for less":                         {made: "cpu=1,memory=512Mi,ephemeral-storage=1G", edit: inEffect("1500m", "1Gi")},
		"made for less, pending":                {made: "cpu=1,memory=512Mi,ephemeral-storage=1G", edit: func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }},
		"made for less, resized since":          {made: "cpu=1,memory=512Mi,ephemeral-storage=1G", edit: resizing()},
		"made for less, in odd forms":           {made: "cpu=1000m,memory=+512Mi,ephemeral-storage=1E9", edit: inEffect("1500m", "1Gi"), exact: true},
		"made for, a record that does not read": {made: "cpu=1,memory", edit: running},
		"made for another image": {edit: func(p *corev1.Pod) {
			running(p)
			p.Annotations[AnnotationImage] = "registry.k8s.io/pause:3.9"
		}},

		// Identities not in the API server's form, and a phase Kubernetes does not have.
		"made-up UIDs": {edit: func(p *corev1.Pod) {
			running(p)
			p.UID, p.OwnerReferences[0].UID = "pod-uid", "VM-UID"
		}, exact: true},
		"uppercase UID":            {edit: func(p *corev1.Pod) { p.UID = "0B6F1C1E-5D5E-4C6A-9D7E-1A2B3C4D5E6F" }, exact: true},
		"no resourceVersion":       {edit: func(p *corev1.Pod) { p.ResourceVersion = "" }, exact: true},
		"resourceVersion 0042":     {edit: func(p *corev1.Pod) { p.ResourceVersion = "0042" }, exact: true},
		"opaque resourceVersion":   {edit: func(p *corev1.Pod) { p.ResourceVersion = "rv-1" }, exact: true},
		"orphaned, by label":       {edit: func(p *corev1.Pod) { p.OwnerReferences = nil }},
		"orphaned, no annotation":  {edit: func(p *corev1.Pod) { p.OwnerReferences, p.Annotations = nil, nil }, exact: true},
		"no owner at all":          {edit: func(p *corev1.Pod) { p.OwnerReferences, p.Annotations, p.Labels = nil, nil, nil }, exact: true},
		"another controller's":     {edit: func(p *corev1.Pod) { p.OwnerReferences[0].Name = "other" }, exact: true},
		"a phase Kubernetes lacks": {edit: func(p *corev1.Pod) { p.Status.Phase = "Hibernating" }, exact: true},
		"no server container":      {edit: func(p *corev1.Pod) { p.Spec.Containers[0].Name = "sidecar"; running(p) }},
		"no node":                  {edit: func(p *corev1.Pod) { p.Spec.NodeName = "" }},
		// Tolerations admission gave the pod (backend.Server.AdmittedTolerations).
		"admitted tolerations": {edit: func(p *corev1.Pod) {
			running(p)
			p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "team", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoSchedule},
				corev1.Toleration{Key: "gpu", Operator: corev1.TolerationOpExists})
		}},

		// The mark of a server made for a restart request: a time as `kubectl vm restart`
		// writes it is compact; other text is kept as read.
		"restart mark":             {edit: func(p *corev1.Pod) { running(p); p.Annotations[AnnotationRestart] = "2026-06-01T11:59:30Z" }},
		"restart mark, fractional": {edit: func(p *corev1.Pod) { running(p); p.Annotations[AnnotationRestart] = "2026-06-01T11:59:30.5Z" }, exact: true},
		"restart mark, offset":     {edit: func(p *corev1.Pod) { running(p); p.Annotations[AnnotationRestart] = "2026-06-01T13:59:30+02:00" }, exact: true},
	}
	seen := map[any]bool{} // the states of the servers, and of their resizes; "keptBy": names of keepers
	for name, tc := range tests {
		for _, decoded := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/decoded=%v", name, decoded), func(t *testing.T) {
				vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "vm-1", UID: vmUID}
				limits := tc.limits
				if limits == nil {
					limits = []string{"1500m", "1Gi", "1G"}
				}
				pod := newPod(vm, backend.Spec{Image: "registry.k8s.io/pause:3.10"})
				if pod.Annotations[AnnotationResources] = tc.made; tc.made == "" {
					delete(pod.Annotations, AnnotationResources)
				}
				res := &pod.Spec.Containers[0].Resources
				for i, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
					delete(res.Limits, r)
					delete(res.Requests, r)
					if limits[i] != "" {
						res.Limits[r], res.Requests[r] = resource.MustParse(limits[i]), resource.MustParse(limits[i])
					}
				}
				pod.UID, pod.ResourceVersion, pod.Spec.NodeName = podUID, "123456", "kwok-node-17"
				pod.CreationTimestamp = started
				tc.edit(pod)
				if decoded {
					raw, err := pod.Marshal()
					if err != nil {
						t.Fatal(err)
					}
					pod = &corev1.Pod{}
					if err := pod.Unmarshal(raw); err != nil {
						t.Fatal(err)
					}
				}

				c, want := cachePod(pod), serverOf(pod)
				seen[want.State], seen[want.Resize.State], seen[want.Waiting.Reason] = true, true, true
				if len(want.KeptBy) > 1 {
					seen["keptBy"] = true
				}
				if diff := serverDiff(*c.observed(nil), want); diff != "" {
					t.Errorf("observed: %s", diff)
				}
				if (c.exact != nil) != tc.exact {
					t.Errorf("kept as read: %+v, want %v", c.exact, tc.exact)
				}

				ownerUID, ownerName := types.UID(pod.Labels[LabelVMUID]), pod.Annotations[AnnotationVM]
				if ref := metav1.GetControllerOf(pod); ref != nil {
					ownerUID, ownerName = ref.UID, ref.Name
				}
				meta, err := apimeta.Accessor(c)
				if err != nil || meta != metav1.Object(c) {
					t.Fatalf("meta.Accessor: %v, %v: want the cached pod itself, read in place", meta, err)
				}
				if meta.GetNamespace() != pod.Namespace || meta.GetName() != pod.Name || meta.GetUID() != pod.UID || meta.GetResourceVersion() != pod.ResourceVersion {
					t.Errorf("object meta %s/%s %s %s, want %s/%s %s %s", meta.GetNamespace(), meta.GetName(), meta.GetUID(), meta.GetResourceVersion(),
						pod.Namespace, pod.Name, pod.UID, pod.ResourceVersion)
				}
				if !c.hasVersion(pod.ResourceVersion) || c.hasVersion(pod.ResourceVersion+"1") || !c.sameVersion(cachePod(pod)) {
					t.Errorf("resourceVersion %q is not the pod's %q", c.resourceVersion(), pod.ResourceVersion)
				}
				if c.ownerName() != ownerName || c.node.String() != pod.Spec.NodeName {
					t.Errorf("owner %q, node %q; want %q, %q", c.ownerName(), c.node.String(), ownerName, pod.Spec.NodeName)
				}
				other := vm
				other.UID = "7c433542-8907-45fe-887a-7813523dba9f"
				if c.owns(vm) != (ownerUID == vm.UID) || c.owns(other) || c.owns(backend.Owner{UID: ownerUID + "x"}) {
					t.Errorf("owns %s: %v, another: %v; the pod names %s", vm.UID, c.owns(vm), c.owns(other), ownerUID)
				}
				if c.deleting() != (pod.DeletionTimestamp != nil) || c.detail() != string(pod.Status.Phase) {
					t.Errorf("deleting %v, detail %q", c.deleting(), c.detail())
				}
			})
		}
	}
	for _, s := range serverStates {
		if !seen[s] {
			t.Errorf("no case of a server %s", s)
		}
	}
	for _, s := range resizeStates {
		if !seen[s] {
			t.Errorf("no case of a resize %q", s)
		}
	}
	if !seen["keptBy"] {
		t.Error("no case of a server that lingers, kept by several containers")
	}
	for _, w := range waitReasons {
		if !seen[w] {
			t.Errorf("no case of a server waiting %q", w)
		}
	}
}

// TestCachedPodCostsLittle: a running, ready pod with nothing under way, in the API server's
// form, is kept in the compact fields alone, with the resources in effect and without.
func TestCachedPodCostsLittle(t *testing.T) {
	for _, withResources := range []bool{false, true} {
		p := benchPod()
		if withResources {
			res := p.Spec.Containers[0].Resources.DeepCopy()
			delete(res.Limits, corev1.ResourceEphemeralStorage)
			delete(res.Requests, corev1.ResourceEphemeralStorage)
			p.Status.ContainerStatuses[0].Resources = res
		}
		if c := cachePod(p); c.notes != nil || c.exact != nil {
			t.Errorf("resources in effect %v: notes %+v, exact %+v; want neither", withResources, c.notes, c.exact)
		}
	}
	// On its VM's disk, as under --root-disk claim: no ephemeral storage, the claim mounted.
	p := benchPod()
	owner := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: p.Namespace, Name: p.Name[:len(p.Name)-len(nameSuffix)]}
	onDisk := newPod(owner, backend.Spec{Image: "i", Disk: true})
	p.Spec.Volumes, p.Spec.Containers[0].VolumeMounts = onDisk.Spec.Volumes, onDisk.Spec.Containers[0].VolumeMounts
	delete(p.Spec.Containers[0].Resources.Limits, corev1.ResourceEphemeralStorage)
	delete(p.Spec.Containers[0].Resources.Requests, corev1.ResourceEphemeralStorage)
	if c := cachePod(p); c.notes != nil || c.exact != nil || c.server().Disk != ClaimName(owner.Name) {
		t.Errorf("on its disk: notes %+v, exact %+v, disk %q; want neither, and the claim", c.notes, c.exact, c.server().Disk)
	}
}

// serverDiff says how got differs from want, "" when it does not: quantities in value, format
// or text, anything else in any way.
func serverDiff(got, want backend.Server) string {
	var diff string
	for _, q := range []struct {
		name      string
		got, want *resource.Quantity
	}{
		{"spec cpu", &got.Spec.CPU, &want.Spec.CPU}, {"spec memory", &got.Spec.Memory, &want.Spec.Memory},
		{"spec rootDisk", &got.Spec.RootDisk, &want.Spec.RootDisk},
		{"cpu in effect", &got.Resize.CPU, &want.Resize.CPU}, {"memory in effect", &got.Resize.Memory, &want.Resize.Memory},
	} {
		if q.got.Cmp(*q.want) != 0 || q.got.Format != q.want.Format || q.got.String() != q.want.String() || q.got.IsZero() != q.want.IsZero() {
			diff += fmt.Sprintf("%s %s (%s), want %s (%s); ", q.name, q.got.String(), q.got.Format, q.want.String(), q.want.Format)
		}
		*q.got, *q.want = resource.Quantity{}, resource.Quantity{}
	}
	if !reflect.DeepEqual(got, want) {
		diff += fmt.Sprintf("server %+v, want %+v", got, want)
	}
	return diff
}

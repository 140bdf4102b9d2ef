package pods

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/cache"

	"github.com/cloudnative-czs/vm-controller/backend"
)

func TestPodName(t *testing.T) {
	long := strings.Repeat("a", 250)
	longer := strings.Repeat("a", 249) + "b"
	tests := map[string]string{
		"test-vm":  "test-vm-server",
		"a.b":      "a.b-server",
		long:       PodName(long),
		"vm-0.x-1": "vm-0.x-1-server",
	}
	for vm, want := range tests {
		got := PodName(vm)
		if got != want {
			t.Errorf("PodName(%q) = %q, want %q", vm, got, want)
		}
		if errs := validation.IsDNS1123Subdomain(got); len(errs) > 0 {
			t.Errorf("PodName(%q) = %q is not a valid name: %v", vm, got, errs)
		}
	}
	if PodName(long) == PodName(longer) {
		t.Error("two long names that differ only at the end map to one pod name")
	}
	for _, vm := range []string{"test-vm", long} {
		if c := ClaimName(vm); !strings.HasSuffix(c, "-rootdisk") || len(validation.IsDNS1123Subdomain(c)) > 0 || c == PodName(vm) {
			t.Errorf("ClaimName(%q) = %q", vm, c)
		}
	}
	if ClaimName(long) == ClaimName(longer) {
		t.Error("two long names that differ only at the end map to one claim name")
	}
	if PodName(long) != PodName(long) {
		t.Error("PodName is not deterministic")
	}
}

func TestNewPod(t *testing.T) {
	owner := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "test-vm", UID: "u-1"}
	spec := backend.Spec{CPU: resource.MustParse("2"), Memory: resource.MustParse("4G"), RootDisk: resource.MustParse("40G"), Image: "img:1"}
	p := newPod(owner, spec)
	if p.Name != "test-vm-server" || p.Namespace != "ns" || p.Labels[LabelVMUID] != "u-1" || p.Labels[LabelVM] != "test-vm" {
		t.Errorf("identity: %s/%s %v", p.Namespace, p.Name, p.Labels)
	}
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.UID != "u-1" || ref.Kind != "VirtualMachine" || ref.APIVersion != owner.APIVersion || !*ref.BlockOwnerDeletion {
		t.Errorf("controller reference: %+v", ref)
	}
	c := p.Spec.Containers[0]
	for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		req, lim := c.Resources.Requests[r], c.Resources.Limits[r]
		if req.Cmp(lim) != 0 || req.IsZero() {
			t.Errorf("%s: requests %s limits %s, want equal and set", r, req.String(), lim.String())
		}
	}
	if q := c.Resources.Limits[corev1.ResourceEphemeralStorage]; q.String() != "40G" {
		t.Errorf("ephemeral-storage %s, want the rootDisk 40G", q.String())
	}
	if c.Image != "img:1" || p.Spec.RestartPolicy != corev1.RestartPolicyNever || *p.Spec.AutomountServiceAccountToken {
		t.Errorf("pod spec: image %s restart %s automount %v", c.Image, p.Spec.RestartPolicy, *p.Spec.AutomountServiceAccountToken)
	}
	// The server reads back the spec it was created with.
	if got := serverOf(p).Spec; !got.Equal(spec) {
		t.Errorf("round trip spec %+v, want %+v", got, spec)
	}
	// On its VM's disk: the claim mounted at DiskMountPath, no ephemeral storage; read back
	// the same, with the claim's name.
	disk := backend.Spec{CPU: spec.CPU, Memory: spec.Memory, Image: spec.Image, Disk: true}
	d := newPod(owner, disk)
	dc := d.Spec.Containers[0]
	if _, eph := dc.Resources.Limits[corev1.ResourceEphemeralStorage]; eph || len(d.Spec.Volumes) != 1 || len(dc.VolumeMounts) != 1 ||
		d.Spec.Volumes[0].PersistentVolumeClaim == nil || d.Spec.Volumes[0].PersistentVolumeClaim.ClaimName != "test-vm-rootdisk" ||
		dc.VolumeMounts[0].MountPath != DiskMountPath || dc.VolumeMounts[0].Name != d.Spec.Volumes[0].Name {
		t.Errorf("pod on its disk: volumes %+v, mounts %+v, limits %v", d.Spec.Volumes, dc.VolumeMounts, dc.Resources.Limits)
	}
	if got := serverOf(d); !got.Spec.Equal(disk) || got.Disk != "test-vm-rootdisk" {
		t.Errorf("round trip of a pod on its disk: %+v", got)
	}
	if c := cachePod(d); c.flags&exactServer != 0 || c.server().Disk != "test-vm-rootdisk" || !c.server().Spec.Disk {
		t.Errorf("a pod on its disk cached as %+v (exact %+v)", c.server(), c.exact)
	}
	// A name that is no valid label value is left out of the label, not truncated.
	if long := newPod(backend.Owner{Name: strings.Repeat("x", 70), UID: "u"}, spec); long.Labels[LabelVM] != "" {
		t.Errorf("an invalid label value was set: %q", long.Labels[LabelVM])
	}
}

func TestServerOf(t *testing.T) {
	finished := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 5, 0, time.UTC))
	ready := func(s corev1.ConditionStatus) []corev1.PodCondition {
		return []corev1.PodCondition{{Type: corev1.PodReady, Status: s}}
	}
	nodeUp := func(string) (bool, bool) { return true, true }
	nodeDown := func(string) (bool, bool) { return false, true }
	nodeGone := func(string) (bool, bool) { return false, false }
	tests := map[string]struct {
		status  corev1.PodStatus
		deleted bool
		nodes   func(string) (bool, bool)
		state   backend.State
		message string // a substring
	}{
		"pending":       {corev1.PodStatus{Phase: corev1.PodPending}, false, nil, backend.StatePending, ""},
		"unschedulable": {corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Message: "0/3 nodes are available"}}}, false, nil, backend.StatePending, "0/3 nodes"},
		// The disk says it, and the scheduler's word outlives the cause (the claim bound).
		"claim unbound": {corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Message: "0/3 nodes are available: pod has unbound immediate PersistentVolumeClaims. preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."}}},
			false, nil, backend.StatePending, "^$"},
		"image pull": {corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "no such image"}}}}},
			false, nil, backend.StatePending, "^$"}, // in Waiting (waiting_test.go)
		"starting":       {corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse)}, false, nodeUp, backend.StateStarting, ""},
		"ready":          {corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionTrue)}, false, nodeUp, backend.StateReady, ""},
		"ready deleting": {corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionTrue)}, true, nil, backend.StateReady, ""},
		"node not ready": {corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionFalse)}, false, nodeDown, backend.StateLost, "node n1 is not ready"},
		"node gone":      {corev1.PodStatus{Phase: corev1.PodRunning, Conditions: ready(corev1.ConditionTrue)}, false, nodeGone, backend.StateLost, "node n1 is gone"},
		"phase unknown":  {corev1.PodStatus{Phase: corev1.PodUnknown, Message: "kubelet unreachable"}, false, nil, backend.StateLost, "kubelet unreachable"},
		// Bound, its image still being pulled: its kubelet may have started it since, and only
		// it can confirm its deletion.
		"pending, node not ready":          {corev1.PodStatus{Phase: corev1.PodPending}, false, nodeDown, backend.StatePending, "^$"},
		"pending deleting, node not ready": {corev1.PodStatus{Phase: corev1.PodPending}, true, nodeDown, backend.StateLost, "node n1 is not ready"},
		"pending deleting, node gone":      {corev1.PodStatus{Phase: corev1.PodPending}, true, nodeGone, backend.StateLost, "node n1 is gone"},
		"pending, node gone":               {corev1.PodStatus{Phase: corev1.PodPending}, false, nodeGone, backend.StatePending, "^$"},
		"pending, node up":                 {corev1.PodStatus{Phase: corev1.PodPending}, false, nodeUp, backend.StatePending, "^$"},
		"failed, node not ready":           {corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}, false, nodeDown, backend.StateFailed, "Evicted"},
		"failed": {corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: ContainerName, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Error", ExitCode: 3, FinishedAt: finished}}}}},
			false, nil, backend.StateFailed, "Error, exit code 3"},
		"evicted":   {corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on memory"}, false, nil, backend.StateFailed, "Evicted: low on memory"},
		"succeeded": {corev1.PodStatus{Phase: corev1.PodSucceeded}, false, nil, backend.StateStopped, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := newPod(backend.Owner{Name: "vm", UID: "u"}, backend.Spec{Image: "i"})
			p.UID, p.Spec.NodeName, p.Status = "pod-uid", "n1", tc.status
			if tc.deleted {
				now := metav1.Now()
				p.DeletionTimestamp = &now
			}
			s := cachePod(p).observed(tc.nodes)
			if tc.message == "^$" && s.Message != "" {
				t.Errorf("message %q, want none", s.Message)
			}
			if s.State != tc.state || !strings.Contains(s.Message, strings.Trim(tc.message, "^$")) || s.ID != "pod-uid" || s.Detail != string(tc.status.Phase) || s.Deleting != tc.deleted {
				t.Errorf("got %+v", s)
			}
			if gone := strings.Contains(tc.message, "is gone"); s.NodeGone != gone {
				t.Errorf("NodeGone = %t, want %t", s.NodeGone, gone)
			}
			// Pending on a node that does not answer, not being deleted: its delete must wait
			// for the node (a stop's grace period is not used).
			if silent := strings.HasPrefix(name, "pending, node not ready") || name == "pending, node gone"; s.NodeSilent != silent {
				t.Errorf("NodeSilent = %t, want %t", s.NodeSilent, silent)
			}
			if name == "failed" && !s.Since.Equal(finished.Time) {

				t.Errorf("Since = %v, want the container's finish time %v", s.Since, finished)
			}
		})
	}
}

// TestOwnsAfterOrphaning: a pod whose owner reference the garbage collector removed (a VM
// deleted with --cascade=orphan) is still its VM's, found by its label and annotation, and
// never another VM's.
func TestOwnsAfterOrphaning(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	p := newPod(vm, backend.Spec{})
	if c := cachePod(p); !c.owns(vm) || c.ownerName() != "a" {
		t.Fatalf("a fresh pod: owns %v, owner %q", c.owns(vm), c.ownerName())
	}
	p.OwnerReferences = nil
	if c := cachePod(p); !c.owns(vm) || c.ownerName() != "a" {
		t.Errorf("an orphaned pod: owns %v, owner %q; want true, a", c.owns(vm), c.ownerName())
	}
	other := vm
	other.UID = "u-2" // a new VM of the same name
	if cachePod(p).owns(other) {
		t.Error("an orphaned pod is taken for the server of another VM of the same name")
	}
	p = newPod(other, backend.Spec{})
	if cachePod(p).owns(vm) {
		t.Error("a pod another VM controls is taken for this VM's")
	}
	// A pod some other controller controls is not the VM's, whatever its label says.
	p = newPod(vm, backend.Spec{})
	p.OwnerReferences[0].UID = "someone-else"
	if cachePod(p).owns(vm) {
		t.Error("a pod another controller controls is taken for this VM's by its label")
	}
}

// TestCachedPod: the informer's transform keeps what Observe, the node index and the event
// handlers read of the typed pod the informer decodes, and nothing of the pod's own maps;
// tombstones pass through.
func TestCachedPod(t *testing.T) {
	vm := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	spec := backend.Spec{CPU: resource.MustParse("250m"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("10Gi"), Image: "img:1"}
	p := newPod(vm, spec)
	p.UID, p.ResourceVersion, p.Spec.NodeName = "pod-uid", "7", "n1"
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	out, err := toCachedPod(p)
	if err != nil {
		t.Fatal(err)
	}
	c := out.(*cachedPod)
	if c.namespace.String() != "ns" || c.name != PodName("a") || c.podUID() != "pod-uid" || c.resourceVersion() != "7" || c.node.String() != "n1" ||
		c.ownerName() != "a" || !c.owns(vm) {
		t.Errorf("cached pod %+v", c)
	}
	if key, err := cache.MetaNamespaceKeyFunc(c); err != nil || key != "ns/"+PodName("a") {
		t.Errorf("informer key %q, %v", key, err)
	}
	s := c.observed(nil)
	if s.State != backend.StateReady || s.ID != "pod-uid" || s.Name != PodName("a") || !s.Spec.Equal(spec) {
		t.Errorf("observed %+v", s)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/x", Obj: c}
	if again, err := toCachedPod(tomb); err != nil || again != tomb {
		t.Errorf("a tombstone did not pass through: %v, %v", again, err)
	}
}

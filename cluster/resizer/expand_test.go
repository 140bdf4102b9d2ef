package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// boundClaim is a claim of size bound to its host-path volume, as the PV controller leaves
// them: the claim Bound with that capacity, the volume provisioned by the host-path
// provisioner.
func boundClaim(size string) (*corev1.PersistentVolumeClaim, *corev1.PersistentVolume) {
	q := resource.MustParse(size)
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "vm-disk", Namespace: "ns", UID: "claim-uid"},
		Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pvc-claim-uid",
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}}},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: q}},
	}
	volume := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-claim-uid", Annotations: map[string]string{provisionedBy: hostPathProvisioner}},
		Spec: corev1.PersistentVolumeSpec{Capacity: corev1.ResourceList{corev1.ResourceStorage: q},
			ClaimRef: &corev1.ObjectReference{Namespace: "ns", Name: "vm-disk", UID: "claim-uid"}},
	}
	return claim, volume
}

// describeClaim is what a test reads of an expansion: the claim's capacity, allocated size,
// resize state and conditions, and the volume's capacity.
func describeClaim(c *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) string {
	var b strings.Builder
	capacity, volume := c.Status.Capacity[corev1.ResourceStorage], v.Spec.Capacity[corev1.ResourceStorage]
	fmt.Fprintf(&b, "capacity %s volume %s", capacity.String(), volume.String())
	if a, ok := c.Status.AllocatedResources[corev1.ResourceStorage]; ok {
		fmt.Fprintf(&b, " allocated %s", a.String())
	}
	if s, ok := c.Status.AllocatedResourceStatuses[corev1.ResourceStorage]; ok {
		fmt.Fprintf(&b, " %s", s)
	}
	for _, cond := range c.Status.Conditions {
		fmt.Fprintf(&b, " %s", cond.Type)
	}
	return b.String()
}

// claimWorld is what a step sees and changes: the claim, its volume and whether a pod mounts it.
type claimWorld struct {
	claim   *corev1.PersistentVolumeClaim
	volume  *corev1.PersistentVolume
	mounted bool
}

func request(size string) func(*claimWorld) {
	return func(w *claimWorld) {
		w.claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	}
}

func answer(v string) func(*claimWorld) {
	return func(w *claimWorld) {
		w.claim.Annotations = nil
		if v != "" {
			w.claim.Annotations = map[string]string{ExpandAnswerAnnotation: v}
		}
	}
}

func mount(on bool) func(*claimWorld) { return func(w *claimWorld) { w.mounted = on } }

// both applies changes in order.
func both(changes ...func(*claimWorld)) func(*claimWorld) {
	return func(w *claimWorld) {
		for _, c := range changes {
			c(w)
		}
	}
}

// TestExpand walks claims through expansions, each step applied before the next, and checks
// every write and every wait in order, with the driver's work taking a second.
func TestExpand(t *testing.T) {
	type want struct {
		what  string        // the step taken ("" none)
		after time.Duration // when to look again
		claim string        // describeClaim() after it
	}
	type stepT struct {
		at     time.Duration     // since t0
		change func(*claimWorld) // what a user or a test did before the step
		want   want
	}
	tests := map[string]struct {
		mounted bool
		steps   []stepT
	}{
		"online, 1Gi to 2Gi": {true, []stepT{
			{0, nil, want{"", 0, "capacity 1Gi volume 1Gi"}},
			{0, request("2Gi"), want{"expanding", time.Second, "capacity 1Gi volume 1Gi allocated 2Gi ControllerResizeInProgress Resizing"}},
			{500 * time.Millisecond, nil, want{"", 500 * time.Millisecond, "capacity 1Gi volume 1Gi allocated 2Gi ControllerResizeInProgress Resizing"}},
			{time.Second, nil, want{"expanded the volume", 0, "capacity 1Gi volume 2Gi allocated 2Gi ControllerResizeInProgress Resizing"}},
			{time.Second, nil, want{"waiting for the node", 0, "capacity 1Gi volume 2Gi allocated 2Gi NodeResizePending Resizing FileSystemResizePending"}},
			{time.Second, nil, want{"expanding on the node", 0, "capacity 1Gi volume 2Gi allocated 2Gi NodeResizeInProgress Resizing FileSystemResizePending"}},
			{time.Second, nil, want{"expanded", 0, "capacity 2Gi volume 2Gi allocated 2Gi"}},
			{time.Second, nil, want{"", 0, "capacity 2Gi volume 2Gi allocated 2Gi"}},
		}},
		"offline until a pod mounts it": {false, []stepT{
			{0, request("2Gi"), want{"expanding", time.Second, "capacity 1Gi volume 1Gi allocated 2Gi ControllerResizeInProgress Resizing"}},
			{time.Second, nil, want{"expanded the volume", 0, "capacity 1Gi volume 2Gi allocated 2Gi ControllerResizeInProgress Resizing"}},
			{time.Second, nil, want{"waiting for the node", 0, "capacity 1Gi volume 2Gi allocated 2Gi NodeResizePending Resizing FileSystemResizePending"}},
			{time.Minute, nil, want{"", 0, "capacity 1Gi volume 2Gi allocated 2Gi NodeResizePending Resizing FileSystemResizePending"}},
			// Asked for more while the node's part waits: that part ends first, at the size it had.
			{time.Minute, request("3Gi"), want{"", 0, "capacity 1Gi volume 2Gi allocated 2Gi NodeResizePending Resizing FileSystemResizePending"}},
			{time.Minute, mount(true), want{"expanding on the node", 0, "capacity 1Gi volume 2Gi allocated 2Gi NodeResizeInProgress Resizing FileSystemResizePending"}},
			{time.Minute, nil, want{"expanded", 0, "capacity 2Gi volume 2Gi allocated 2Gi"}},
			{time.Minute, nil, want{"expanding", time.Second, "capacity 2Gi volume 2Gi allocated 3Gi ControllerResizeInProgress Resizing"}},
		}},
		"refused, then let go": {true, []stepT{
			{0, both(answer("Infeasible"), request("2Gi")), want{"expanding", time.Second, "capacity 1Gi volume 1Gi allocated 2Gi ControllerResizeInProgress Resizing"}},
			{time.Second, nil, want{"refused", 0, "capacity 1Gi volume 1Gi allocated 2Gi ControllerResizeInfeasible Resizing ControllerResizeError"}},
			{time.Hour, nil, want{"", 0, "capacity 1Gi volume 1Gi allocated 2Gi ControllerResizeInfeasible Resizing ControllerResizeError"}},
			// Asked for another size: tried again, and refused again.
			{time.Hour, request("3Gi"), want{"expanding", time.Second, "capacity 1Gi volume 1Gi allocated 3Gi ControllerResizeInProgress Resizing"}},
			{time.Hour + time.Second, nil, want{"refused", 0, "capacity 1Gi volume 1Gi allocated 3Gi ControllerResizeInfeasible Resizing ControllerResizeError"}},
			// The answer removed: tried again, the error condition gone.
			{2 * time.Hour, answer(""), want{"expanding", time.Second, "capacity 1Gi volume 1Gi allocated 3Gi ControllerResizeInProgress Resizing"}},
			{2*time.Hour + time.Second, nil, want{"expanded the volume", 0, "capacity 1Gi volume 3Gi allocated 3Gi ControllerResizeInProgress Resizing"}},
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			claim, volume := boundClaim("1Gi")
			w := &claimWorld{claim, volume, tc.mounted}
			for i, st := range tc.steps {
				if st.change != nil {
					st.change(w)
				}
				s := expand(w.claim, w.volume, w.mounted, t0.Add(st.at), time.Second)
				if s.status != nil {
					w.claim.Status = *s.status
				}
				if s.capacity != nil {
					w.volume.Spec.Capacity[corev1.ResourceStorage] = *s.capacity
				}
				if got := (want{s.what, s.after, describeClaim(w.claim, w.volume)}); got != st.want {
					t.Fatalf("step %d: %+v, want %+v", i, got, st.want)
				}
			}
		})
	}
}

// TestExpandNotOurs: a claim not bound yet, or bound to a volume of another provisioner or to
// a volume that names another claim, is left alone however much it asks for.
func TestExpandNotOurs(t *testing.T) {
	for name, change := range map[string]func(*corev1.PersistentVolumeClaim, *corev1.PersistentVolume){
		"pending": func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
			c.Status.Phase = corev1.ClaimPending
		},
		"another provisioner": func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.Annotations[provisionedBy] = "csi.example.com"
		},
		"a static volume":          func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) { v.Annotations = nil },
		"another claim's volume":   func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) { v.Spec.ClaimRef.UID = "other" },
		"a volume not yet claimed": func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) { v.Spec.ClaimRef = nil },
	} {
		t.Run(name, func(t *testing.T) {
			claim, volume := boundClaim("1Gi")
			claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
			change(claim, volume)
			if s := expand(claim, volume, true, t0, time.Second); s != (volumeStep{}) {
				t.Errorf("step %+v; want none", s)
			}
		})
	}
	claim, _ := boundClaim("1Gi")
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	if s := expand(claim, nil, true, t0, time.Second); s != (volumeStep{}) {
		t.Errorf("without its volume: step %+v; want none", s)
	}
}

// TestResizeConditions: other conditions stay where they are; a condition of the same type is
// replaced; the other expansion conditions go unless kept.
func TestResizeConditions(t *testing.T) {
	old := []corev1.PersistentVolumeClaimCondition{
		{Type: "Custom", Status: corev1.ConditionTrue},
		{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, Message: "old"},
		{Type: corev1.PersistentVolumeClaimControllerResizeError, Status: corev1.ConditionTrue},
	}
	resizing := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue, Message: "new"}
	pending := corev1.PersistentVolumeClaimCondition{Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue}
	show := func(cs []corev1.PersistentVolumeClaimCondition) string {
		var out []string
		for _, c := range cs {
			out = append(out, string(c.Type)+"/"+c.Message)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		keep bool
		add  []corev1.PersistentVolumeClaimCondition
		want string
	}{
		{false, []corev1.PersistentVolumeClaimCondition{resizing}, "Custom/ Resizing/new"},
		{true, []corev1.PersistentVolumeClaimCondition{pending}, "Custom/ Resizing/old ControllerResizeError/ FileSystemResizePending/"},
		{false, nil, "Custom/"},
	} {
		if got := show(resizeConditions(old, tc.keep, tc.add...)); got != tc.want {
			t.Errorf("keep %v, add %s: %s, want %s", tc.keep, show(tc.add), got, tc.want)
		}
	}
	if old[1].Message != "old" {
		t.Errorf("the old conditions were changed: %s", show(old))
	}
}

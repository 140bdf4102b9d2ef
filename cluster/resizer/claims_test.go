package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// mountingPod is a pod of the claim's namespace on node that mounts the claim vm-disk.
func mountingPod(node string, phase corev1.PodPhase) *corev1.Pod {
	p := kwokPod("1", "1G")
	p.Spec.NodeName, p.Status.Phase = node, phase
	p.Spec.Volumes = []corev1.Volume{{Name: "disk",
		VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "vm-disk"}}}}
	return p
}

// TestMounted: a claim is mounted where a pod that uses it is bound to a node this program
// plays the kubelet of and has not ended.
func TestMounted(t *testing.T) {
	for _, tc := range []struct {
		name    string
		objs    []runtime.Object
		mounted bool
	}{
		{"running on a kwok node", []runtime.Object{mountingPod("n", corev1.PodRunning), kwokNode("n", "fake")}, true},
		{"pending on a kwok node", []runtime.Object{mountingPod("n", corev1.PodPending), kwokNode("n", "fake")}, true},
		{"no pod", []runtime.Object{kwokNode("n", "fake")}, false},
		{"not scheduled", []runtime.Object{mountingPod("", corev1.PodPending), kwokNode("n", "fake")}, false},
		{"ended", []runtime.Object{mountingPod("n", corev1.PodSucceeded), kwokNode("n", "fake")}, false},
		{"on a real node", []runtime.Object{mountingPod("n", corev1.PodRunning), kwokNode("n", "")}, false},
		{"on a lost node", []runtime.Object{mountingPod("n", corev1.PodRunning), kwokNode("n", "fake"), nodeLease("n", LostHolder)}, false},
		{"another namespace's claim", []runtime.Object{func() *corev1.Pod {
			p := mountingPod("n", corev1.PodRunning)
			p.Namespace = "other"
			return p
		}(), kwokNode("n", "fake")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := newTestResizer(t, tc.objs...)
			claim, _ := boundClaim("1Gi")
			if got := r.mounted(claim); got != tc.mounted {
				t.Errorf("mounted %v, want %v", got, tc.mounted)
			}
		})
	}
}

// patches lists the patches a fake clientset was asked for, as "resource/subresource: patch".
func patches(c *fake.Clientset) []string {
	var out []string
	for _, a := range c.Actions() {
		if p, ok := a.(k8stesting.PatchActionImpl); ok {
			out = append(out, p.GetResource().Resource+"/"+p.GetSubresource()+": "+string(p.GetPatch()))
		}
	}
	return out
}

// TestHandleClaim: the driver's step grows the volume, the kubelet's sets the claim's status,
// each by a patch on the condition of the version it was decided on, and the API's objects end
// as the steps said.
func TestHandleClaim(t *testing.T) {
	key := cache.ObjectName{Namespace: "ns", Name: "vm-disk"}
	ctx := context.Background()

	// The driver's work is done: the volume grows to the allocated size.
	claim, volume := boundClaim("1Gi")
	claim.ResourceVersion, volume.ResourceVersion = "7", "5"
	claim.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse("2Gi")
	claim.Status.AllocatedResources = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("2Gi")}
	setStorageState(&claim.Status, corev1.PersistentVolumeClaimControllerResizeInProgress)
	claim.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: corev1.PersistentVolumeClaimResizing,
		Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Now().Add(-time.Minute))}}
	r, client := newTestResizer(t, claim, volume, mountingPod("n", corev1.PodRunning), kwokNode("n", "fake"))
	client.ClearActions()
	if _, err := r.handleClaim(ctx, key); err != nil {
		t.Fatal(err)
	}
	got := patches(client)
	if len(got) != 1 || !strings.HasPrefix(got[0], "persistentvolumes/: ") || !strings.Contains(got[0], `"resourceVersion":"5"`) {
		t.Fatalf("patches %q; want one of the volume, on its resourceVersion", got)
	}
	pv, err := client.CoreV1().PersistentVolumes().Get(ctx, volume.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size := pv.Spec.Capacity[corev1.ResourceStorage]; size.String() != "2Gi" || pv.Spec.ClaimRef == nil {
		t.Errorf("volume after the step: capacity %s, claimRef %v; want 2Gi and its claim", size.String(), pv.Spec.ClaimRef)
	}

	// The kubelet's work is done: the claim has its new capacity and no resize state left.
	claim.Status.Capacity = corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	setStorageState(&claim.Status, corev1.PersistentVolumeClaimNodeResizeInProgress)
	claim.Status.Conditions = append(claim.Status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue})
	r, client = newTestResizer(t, claim, pv, mountingPod("n", corev1.PodRunning), kwokNode("n", "fake"))
	client.ClearActions()
	if _, err := r.handleClaim(ctx, key); err != nil {
		t.Fatal(err)
	}
	got = patches(client)
	if len(got) != 1 || !strings.HasPrefix(got[0], "persistentvolumeclaims/status: ") || !strings.Contains(got[0], `"resourceVersion":"7"`) {
		t.Fatalf("patches %q; want one of the claim's status, on its resourceVersion", got)
	}
	done, err := client.CoreV1().PersistentVolumeClaims("ns").Get(ctx, "vm-disk", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d := describeClaim(done, pv); d != "capacity 2Gi volume 2Gi allocated 2Gi" {
		t.Errorf("claim after the step: %s; want capacity 2Gi and no resize state", d)
	}
}

// TestClaimStatusPatch: the patch removes the storage's resize state and the conditions the
// step dropped, and leaves the rest of the status alone.
func TestClaimStatusPatch(t *testing.T) {
	claim, _ := boundClaim("1Gi")
	setStorageState(&claim.Status, corev1.PersistentVolumeClaimNodeResizeInProgress)
	claim.Status.Conditions = []corev1.PersistentVolumeClaimCondition{{Type: "Custom", Status: corev1.ConditionTrue},
		{Type: corev1.PersistentVolumeClaimResizing, Status: corev1.ConditionTrue}}
	next := *claim.Status.DeepCopy()
	setStorageState(&next, "")
	next.Conditions = resizeConditions(next.Conditions, false)
	patch, err := versionedPatch(corev1.PersistentVolumeClaim{Status: claim.Status}, corev1.PersistentVolumeClaim{Status: next}, "9")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(patch, &m); err != nil {
		t.Fatal(err)
	}
	want := `{"metadata":{"resourceVersion":"9"},"status":{"$setElementOrder/conditions":[{"type":"Custom"}],"allocatedResourceStatuses":null,"conditions":[{"$patch":"delete","type":"Resizing"}]}}`
	if got, _ := json.Marshal(m); string(got) != want {
		t.Errorf("patch %s\nwant  %s", got, want)
	}
}

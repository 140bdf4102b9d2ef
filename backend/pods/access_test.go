package pods

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/cloudnative-czs/vm-controller/access"
	"github.com/cloudnative-czs/vm-controller/backend"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// rbac is an API server's authoriser for a fake clientset that grants what the rules grant
// and nothing else, as a cluster set up from `vm-controller manifests` does: a request no rule
// grants is refused (403) and recorded. The scope of a rule (namespace, cluster, names) is not
// checked, only its group, resource and verbs.
type rbac struct {
	rules []access.Rule
	mu    sync.Mutex
	seen  map[string]bool // "verb resource.group" of every request
	// denied are the requests refused, in order.
	denied []string
}

// enforceRBAC makes client refuse every request that rules do not grant, the watches of the
// informers included. It goes first: reactors added before it answer only what it lets
// through.
func enforceRBAC(client *kubefake.Clientset, rules []access.Rule) *rbac {
	r := &rbac{rules: rules, seen: map[string]bool{}}
	client.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if err := r.authorize(a); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	client.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		if err := r.authorize(a); err != nil {
			return true, nil, err
		}
		return false, nil, nil
	})
	return r
}

// authorize records a and returns the API server's refusal when no rule grants it.
func (r *rbac) authorize(a clienttesting.Action) error {
	gvr := a.GetResource()
	res := gvr.Resource
	if sub := a.GetSubresource(); sub != "" {
		res += "/" + sub
	}
	req := fmt.Sprintf("%s %s", a.GetVerb(), schema.GroupResource{Group: gvr.Group, Resource: res})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen[req] = true
	for _, rule := range r.rules {
		if rule.Group == gvr.Group && rule.Resource == res && slices.Contains(rule.Verbs, a.GetVerb()) {
			return nil
		}
	}
	r.denied = append(r.denied, req)
	return apierrors.NewForbidden(gvr.GroupResource(), "", fmt.Errorf("RBAC: %s is not granted", req))
}

// check fails t for every request refused, and for every request of want the backend did not
// make (the test no longer exercises it).
func (r *rbac) check(t *testing.T, want []string) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, req := range r.denied {
		t.Errorf("%s: refused by the controller's RBAC (access.Rules); grant it there", req)
	}
	var missing []string
	for _, req := range want {
		if !r.seen[req] {
			missing = append(missing, req)
		}
	}
	if len(missing) > 0 {
		var seen []string
		for req := range r.seen {
			seen = append(seen, req)
		}
		sort.Strings(seen)
		t.Errorf("the backend never made %v; it made:\n%s", missing, strings.Join(seen, "\n"))
	}
}

// TestBackendUnderRBAC runs each request of the pod backend (servers, disks, budgets, and the
// informers behind them) against an API server that grants the controller's RBAC and nothing
// more, access.Rules, from which the manifests and the check command are made: a request the
// code makes and the rules do not grant would be refused on every cluster, retried for ever.
func TestBackendUnderRBAC(t *testing.T) {
	vmA := backend.Owner{APIVersion: "cloudnative.czs/v1alpha1", Kind: "VirtualMachine", Namespace: "ns", Name: "a", UID: "u-1"}
	vmB := backend.Owner{APIVersion: vmA.APIVersion, Kind: vmA.Kind, Namespace: "ns", Name: "b", UID: "u-2"}
	vmC := backend.Owner{APIVersion: vmA.APIVersion, Kind: vmA.Kind, Namespace: "ns", Name: "c", UID: "u-3"}
	vmD := backend.Owner{APIVersion: vmA.APIVersion, Kind: vmA.Kind, Namespace: "ns", Name: "d", UID: "u-4"}
	// The world before: a running server to resize, vm a's disk on a volume, the budgets
	// earlier VMs named b and c left controlled by nothing, and vm d's budget that an earlier
	// version made without its kind.
	claim := newClaim(vmA, backend.DiskSpec{Size: resource.MustParse("40G"), StorageClass: "standard"})
	claim.UID, claim.ResourceVersion, claim.Spec.VolumeName = "pvc-1", "1", "pv-1"
	volume := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1", ResourceVersion: "1"}}
	objs := []runtime.Object{runningPod("2", "4G"), storageClass("standard", true), claim, volume}
	for _, vm := range []backend.Owner{vmB, vmC} {
		earlier := vm
		earlier.UID = "earlier-" + vm.UID
		left := newBudget(earlier)
		left.OwnerReferences, left.UID, left.ResourceVersion = nil, "pdb-"+vm.UID, "1"
		objs = append(objs, left)
	}
	unrecorded := newBudget(vmD)
	delete(unrecorded.Annotations, AnnotationOwnerKind)
	unrecorded.UID, unrecorded.ResourceVersion = "pdb-u-4", "1"
	objs = append(objs, unrecorded)
	client := kubefake.NewClientset(objs...)
	resizingAPIServer(t, client, nil)
	gvr := schema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}
	authz := enforceRBAC(client, access.Rules(access.Needs{GVR: gvr, WatchNodes: true, Disks: true}))
	b, _ := started(t, Config{Client: client, WatchNodes: true, Disks: true, Budgets: true})
	ctx := t.Context()
	spec := backend.Spec{CPU: resource.MustParse("1"), Memory: resource.MustParse("1Gi"), RootDisk: resource.MustParse("1G"), Image: "img"}
	var grown *backend.Disk // vm a's disk as its growth returned it, which the delete is conditional on

	steps := []struct {
		name string
		do   func() error
	}{
		{"create a server", func() error { _, err := b.Create(ctx, vmA, spec); return err }},
		{"create a server whose pod is taken", func() error {
			other := vmA
			other.UID = "u-9"
			if _, err := b.Create(ctx, other, spec); !errors.Is(err, backend.ErrRejected) {
				return fmt.Errorf("%v, want ErrRejected (the pod is another's)", err)
			}
			return nil
		}},
		{"read a server", func() error { _, err := b.Get(ctx, vmA); return err }},
		{"resize a server", func() error {
			_, err := b.Resize(ctx, resizeOwner, backend.Spec{CPU: resource.MustParse("3"), Memory: resource.MustParse("4G"),
				RootDisk: resource.MustParse("40G"), Image: "img:1"})
			return err
		}},
		{"delete a server", func() error { return b.Delete(ctx, resizeOwner) }},
		{"create a disk that exists", func() error {
			_, err := b.CreateDisk(ctx, vmA, backend.DiskSpec{Size: resource.MustParse("40G"), StorageClass: "standard"})
			return err
		}},
		{"grow a disk", func() error {
			var err error
			seen, _ := b.ObserveDisk(vmA)
			grown, err = b.UpdateDisk(ctx, vmA, seen, backend.DiskSpec{Size: resource.MustParse("50G")})
			return err
		}},
		{"tell whether a disk is pinned", func() error { _, err := b.DiskPinned(ctx, vmA); return err }},
		{"read a disk past the cache", func() error { _, err := b.ReadDisk(ctx, vmA); return err }},
		{"delete a disk", func() error { return b.DeleteDisk(ctx, vmA, grown) }},
		{"create a budget", func() error { _, err := b.CreateBudget(ctx, vmA); return err }},
		{"create a budget that exists", func() error { _, err := b.CreateBudget(ctx, vmA); return err }},
		{"adopt a budget left behind", func() error { _, err := b.AdoptBudget(ctx, vmB); return err }},
		{"create a budget over one left behind", func() error { _, err := b.CreateBudget(ctx, vmC); return err }},
		{"record the kind on a budget of an earlier version", func() error {
			got, err := b.RecordBudgetKind(ctx, vmD)
			if err == nil && got.KindUnrecorded {
				return errors.New("the kind is not recorded")
			}
			return err
		}},
		{"delete a budget", func() error { return b.DeleteBudget(ctx, vmA) }},
	}
	for _, s := range steps {
		if err := s.do(); err != nil {
			t.Errorf("%s: %v", s.name, err)
		}
	}
	authz.check(t, []string{
		"list pods", "create pods", "get pods", "delete pods", "patch pods/resize",
		"list persistentvolumeclaims", "create persistentvolumeclaims", "get persistentvolumeclaims",
		"patch persistentvolumeclaims", "delete persistentvolumeclaims", "get persistentvolumes",
		"list storageclasses.storage.k8s.io", "list events", "list nodes",
		"list poddisruptionbudgets.policy", "create poddisruptionbudgets.policy",
		"get poddisruptionbudgets.policy", "patch poddisruptionbudgets.policy", "delete poddisruptionbudgets.policy",
	})
}

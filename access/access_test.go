package access

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/crds"

	_ "github.com/cloudnative-czs/vm-controller/internal/golden" // registers -update: go test ./... -update passes it to every package
)

// TestCRDRule: with --watch-crd the controller may read its own CRD, named as package crds
// names it, and no other; without it, no CRD at all.
func TestCRDRule(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "compute.example.org", Version: "v1", Resource: "machines"}
	tests := map[string]struct {
		watchCRD bool
		want     []string // the names the CRD rule is limited to; nil: no CRD rule
	}{
		"watch-crd":    {watchCRD: true, want: []string{"machines.compute.example.org"}},
		"no watch-crd": {watchCRD: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []string
			found := 0
			for _, r := range Rules(Needs{GVR: gvr, WatchCRD: tc.watchCRD}) {
				if r.Group == crds.GVR.Group && r.Resource == crds.GVR.Resource {
					found++
					got = r.Names
					if !r.Cluster || !slices.Equal(r.Verbs, []string{"get", "list", "watch"}) {
						t.Errorf("CRD rule %+v: want cluster-scoped get, list, watch", r)
					}
				}
			}
			if found > 1 || !slices.Equal(got, tc.want) {
				t.Errorf("%d CRD rules naming %v, want names %v", found, got, tc.want)
			}
		})
	}
}

// TestWebhookRules: the webhook may touch its one Secret by name (create excepted, which RBAC
// cannot limit by name) and its one CRD by name, nothing cluster-wide but that CRD, and no
// resource of the controller's.
func TestWebhookRules(t *testing.T) {
	rules := WebhookRules(Webhook{Secret: "vm-controller-webhook-tls", CRD: "virtualmachines.cloudnative.czs"})
	type grant struct{ resource, verb, name string }
	var got []grant
	for _, r := range rules {
		if r.Why == "" {
			t.Errorf("rule %+v gives no reason", r)
		}
		if r.Cluster != (r.Resource == crds.GVR.Resource) || (!r.Cluster && !r.Own) {
			t.Errorf("rule %+v: only the CRD rule may be cluster-wide, and the others must be in the webhook's namespace", r)
		}
		for _, v := range r.Verbs {
			name := ""
			if len(r.Names) == 1 {
				name = r.Names[0]
			} else if len(r.Names) > 1 {
				t.Errorf("rule %+v names %d objects, want at most one", r, len(r.Names))
			}
			got = append(got, grant{r.Resource, v, name})
		}
	}
	want := []grant{
		{"secrets", "get", "vm-controller-webhook-tls"},
		{"secrets", "update", "vm-controller-webhook-tls"},
		{"secrets", "create", ""},
		{"customresourcedefinitions", "get", "virtualmachines.cloudnative.czs"},
		{"customresourcedefinitions", "list", "virtualmachines.cloudnative.czs"},
		{"customresourcedefinitions", "watch", "virtualmachines.cloudnative.czs"},
		{"customresourcedefinitions", "patch", "virtualmachines.cloudnative.czs"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("webhook grants\n%v\nwant\n%v", got, want)
	}
}

// TestDiskRules: under --root-disk claim the controller may do to claims what a VM's disk
// needs and no more (no update, no deletecollection), read StorageClasses cluster-wide, and
// read Events (the binder's); without it (ephemeral), it may still read, patch and delete
// claims (a disk left from claim is kept or deleted as its VM's reclaim policy says), and
// nothing else of these: no create, no get, no StorageClasses, no Events.
func TestDiskRules(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "cloudnative.czs", Version: "v1alpha1", Resource: "virtualmachines"}
	want := map[string]string{
		"/persistentvolumeclaims":       "get,list,watch,create,patch,delete namespaced",
		"storage.k8s.io/storageclasses": "list,watch cluster",
		"/events":                       "list,watch namespaced",
	}
	left := map[string]string{"/persistentvolumeclaims": "get,list,watch,patch,delete namespaced"}
	for _, disks := range []bool{true, false} {
		got := map[string]string{}
		for _, r := range Rules(Needs{GVR: gvr, Disks: disks}) {
			key := r.Group + "/" + r.Resource
			if _, ok := want[key]; !ok {
				continue
			}
			scope := "namespaced"
			if r.Cluster {
				scope = "cluster"
			}
			got[key] = strings.Join(r.Verbs, ",") + " " + scope
		}
		switch {
		case disks && !maps.Equal(got, want):
			t.Errorf("with disks: %v, want %v", got, want)
		case !disks && !maps.Equal(got, left):
			t.Errorf("without disks: %v, want %v", got, left)
		}
	}
}

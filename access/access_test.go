package access

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/crd"
)

// TestCRDRule: with --watch-crd the controller may read its own CRD, named as package crd
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
				if r.Group == crd.GVR.Group && r.Resource == crd.GVR.Resource {
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

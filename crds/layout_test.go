package crds

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChooseLayout: a CRD of another group gets the built-in layout its schema has, and
// none when its schema has none or accepts more than one.
func TestChooseLayout(t *testing.T) {
	tests := map[string]struct {
		file, version string
		want          string // the version whose layout is chosen; "" for an error
		why, err      string // in the reason, or in the error
		// without: the layout leaves out the disk's fields, the eviction strategy, the placement,
		// the server's node and IP, the run strategies' status and the migration,
		// which the schema (of an earlier release of the project's CRD) lacks.
		without bool
	}{
		"the project's CRD": {file: "", version: "v1alpha1", want: "cloudnative.czs/v1alpha1",
			why: "built-in layout of cloudnative.czs/v1alpha1: the CRD's schema has every path (32)"},
		"v1alpha1 shape": {file: "same-shape.yaml", version: "v1alpha1", want: "cloudnative.czs/v1alpha1", without: true,
			why: "built-in layout of cloudnative.czs/v1alpha1 without spec.rootDiskStorageClassName, spec.rootDiskReclaimPolicy, spec.evictionStrategy, spec.placement, status.rootDisk.claimName, status.rootDisk.phase, status.rootDisk.capacity, status.rootDisk.request, status.server.node, status.server.ip, status.nextRetryTime, status.startRequestedAt, status.stopRequestedAt, status.migration, which the CRD's schema lacks: it has every other path (18)"},
		"v1beta1 of that shape": {file: "same-shape.yaml", version: "v1beta1", want: "cloudnative.czs/v1alpha1", without: true,
			why: "not cloudnative.czs/v1's (spec.action.path at spec.runStrategy: the schema has no property \"runStrategy\" under spec)"},
		"v1 shape": {file: "v1-shape.yaml", version: "v1", want: "cloudnative.czs/v1", without: true,
			why: "built-in layout of cloudnative.czs/v1 without spec.rootDiskStorageClassName"},
		"fields elsewhere": {file: "../machines/crd.yaml", version: "v1",
			err: "has no built-in layout: not cloudnative.czs/v1's"},
		"open schema": {file: "open.yaml", version: "v1alpha1",
			err: "accepts the layouts of cloudnative.czs/v1 and cloudnative.czs/v1alpha1 alike"},
		"no such version": {file: "same-shape.yaml", version: "v2", err: "has no version v2"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var crd []byte
			if tc.file == "" {
				crd = projectCRD(t)
			} else {
				data, err := os.ReadFile(filepath.Join("..", "testdata", "crds", tc.file))
				if err != nil {
					t.Fatal(err)
				}
				crd = crdJSON(t, data)
			}
			l, err := ChooseLayout(crd, tc.version)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one containing %q (chose %s)", err, tc.err, l.Of)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if l.Of.String() != tc.want || !strings.Contains(l.Why, tc.why) {
				t.Errorf("chose %s because %q; want %s because of %q", l.Of, l.Why, tc.want, tc.why)
			}
			want := builtin(t, l.Of.Version)
			if tc.without {
				want.RootDiskStorageClass, want.RootDiskReclaimPolicy = "", ""
				want.EvictionStrategy = ""
				want.RootDiskClaim, want.RootDiskPhase, want.RootDiskCapacity, want.RootDiskRequest = "", "", "", ""
				want.ServerNode, want.ServerIP = "", ""
				want.NextRetryTime, want.StartRequestedAt, want.StopRequestedAt = "", "", ""
				want.Placement, want.Migration = "", ""
			}
			if l.Fields != want {
				t.Errorf("the layout's fields are not the built-in map of %s (without the disk's: %v):\n%+v", l.Of, tc.without, l.Fields)
			}
		})
	}
}

// TestChooseLayoutWithoutRequest: a CRD copied from the release before status.rootDisk.request
// gets the layout without the request alone: its VMs' status still reports the disk (its
// claim, phase and capacity), as that release's did, and rootDisk goes back no lower than the
// disk's capacity there, as it did.
func TestChooseLayoutWithoutRequest(t *testing.T) {
	crd := edit(t, upgradedCRD(t), func(m map[string]any) {
		for _, v := range m["spec"].(map[string]any)["versions"].([]any) {
			props := v.(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)
			disk := props["status"].(map[string]any)["properties"].(map[string]any)["rootDisk"].(map[string]any)
			delete(disk["properties"].(map[string]any), "request")
		}
	})
	l, err := ChooseLayout(crd, "v1alpha1")
	if err != nil {
		t.Fatal(err)
	}
	want := builtin(t, "v1alpha1")
	want.RootDiskRequest = ""
	if l.Fields != want || !strings.Contains(l.Why, "without status.rootDisk.request, which") {
		t.Errorf("chose %s because %q:\n%+v\nwant the built-in map of v1alpha1 without status.rootDisk.request alone", l.Of, l.Why, l.Fields)
	}
}

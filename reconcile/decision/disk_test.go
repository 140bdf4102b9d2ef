package decision

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cloudnative-czs/vm-controller/schema"
)

// TestPolicyPatch: the command an adoption's Event gives sets the reclaim policy where the
// VM's layout keeps it, as JSON that kubectl reads.
func TestPolicyPatch(t *testing.T) {
	for path, want := range map[string]string{
		"spec.rootDiskReclaimPolicy":    `{"spec":{"rootDiskReclaimPolicy":"Delete"}}`,
		"spec.rootDisk.reclaimPolicy":   `{"spec":{"rootDisk":{"reclaimPolicy":"Delete"}}}`,
		"spec.disks.boot.reclaim":       `{"spec":{"disks":{"boot":{"reclaim":"Delete"}}}}`,
		"rootDiskReclaimPolicyAtTheTop": `{"rootDiskReclaimPolicyAtTheTop":"Delete"}`,
	} {
		got := policyPatch(path, schema.ReclaimDelete)
		if got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s: %s is not JSON", path, got)
		}
	}
}

// TestDeleteHintNamesVersion: the patch the Events of a kept disk give (deleteHint) reaches the
// version whose field map gave its path, whatever version kubectl prefers: it names the type
// fully (kind, version, group), as kubectl resolves it, not `vm`, which kubectl sends to the
// version discovery lists first (v1 with the webhook form of the CRD), where the API server
// drops another version's fields with a warning and the patch changes nothing. The patch,
// merged into the VM at that version, makes it name Delete.
func TestDeleteHintNamesVersion(t *testing.T) {
	machines, err := os.ReadFile(filepath.Join("..", "..", "testdata", "machines", "fieldmap.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	layouts := map[string]struct {
		fields func(t *testing.T) schema.Fields
		vm     string // the VM at that version, with no reclaim policy
		want   string // the command's start
	}{
		"v1alpha1": {fields: builtin("v1alpha1"), want: "kubectl patch virtualmachine.v1alpha1.cloudnative.czs/db -n prod --type merge -p '",
			vm: `{"apiVersion":"cloudnative.czs/v1alpha1","kind":"VirtualMachine","metadata":{"name":"db","namespace":"prod"},"spec":{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"1Gi"}}}`},
		"v1beta1": {fields: builtin("v1beta1"), want: "kubectl patch virtualmachine.v1beta1.cloudnative.czs/db -n prod --type merge -p '",
			vm: `{"apiVersion":"cloudnative.czs/v1beta1","kind":"VirtualMachine","metadata":{"name":"db","namespace":"prod"},"spec":{"action":"active","resource":{"cpu":1,"memory":"1Gi","rootDisk":"1Gi"}}}`},
		"v1": {fields: builtin("v1"), want: "kubectl patch virtualmachine.v1.cloudnative.czs/db -n prod --type merge -p '",
			vm: `{"apiVersion":"cloudnative.czs/v1","kind":"VirtualMachine","metadata":{"name":"db","namespace":"prod"},"spec":{"runStrategy":"Always","resources":{"requests":{"cpu":1,"memory":"1Gi"}},"rootDisk":{"size":"1Gi"}}}`},
		"another group's": {want: "kubectl patch machine.v1.compute.example.org/db -n prod --type merge -p '",
			fields: func(t *testing.T) schema.Fields {
				f, err := schema.ParseFieldMap(bytes.Replace(machines, []byte("  image: spec.bootImage\n"),
					[]byte("  image: spec.bootImage\n  rootDiskReclaimPolicy: spec.disks.boot.reclaim\n"), 1))
				if err != nil {
					t.Fatal(err)
				}
				return f
			},
			vm: `{"apiVersion":"compute.example.org/v1","kind":"Machine","metadata":{"name":"db","namespace":"prod"},"spec":{"power":"On","shape":{"cores":1,"ram":"1Gi"},"disks":{"boot":{"size":"1Gi"}}}}`},
	}
	for name, tc := range layouts {
		t.Run(name, func(t *testing.T) {
			f := tc.fields(t)
			vm, err := schema.Parse([]byte(tc.vm), f)
			if err != nil {
				t.Fatal(err)
			}
			spec, errs := vm.Spec()
			if len(errs) > 0 || spec.ReclaimPolicySet {
				t.Fatalf("the case's VM: %v, reclaim policy set: %v", errs, spec.ReclaimPolicySet)
			}
			d := decision{vm: vm}
			hint := d.deleteHint(spec)
			_, cmd, _ := strings.Cut(hint, ": ")
			if !strings.HasPrefix(cmd, tc.want) || !strings.HasSuffix(cmd, "'") {
				t.Fatalf("the hint is %q, want the command %s...'", hint, tc.want)
			}
			patch := strings.TrimSuffix(strings.TrimPrefix(cmd, tc.want), "'")
			raw, err := jsonpatch.MergePatch([]byte(tc.vm), []byte(patch))
			if err != nil {
				t.Fatalf("the hint's patch %s: %v", patch, err)
			}
			patched, err := schema.Parse(raw, f)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := patched.Spec(); !got.ReclaimPolicySet || got.ReclaimPolicy != schema.ReclaimDelete {
				t.Errorf("the hint's patch %s leaves the VM at %s without reclaim policy Delete: %s", patch, name, raw)
			}
		})
	}
}

// builtin is the built-in field map of a version of this project's CRD.
func builtin(version string) func(t *testing.T) schema.Fields {
	return func(t *testing.T) schema.Fields {
		f, err := schema.ForVersion(k8sschema.GroupVersion{Group: schema.Group, Version: version})
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
}

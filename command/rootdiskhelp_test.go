package command

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	"sigs.k8s.io/yaml"
)

// TestManifestsRootDiskHelpSaysWhatIsGranted: manifests --help says which verbs on
// PersistentVolumeClaims --root-disk ephemeral grants, and those are the verbs of the RBAC it
// prints. The help said "list, watch, patch and delete"; the Role granted get too.
func TestManifestsRootDiskHelpSaysWhatIsGranted(t *testing.T) {
	var out bytes.Buffer
	a := App("v1.0.0")
	a.Writer, a.ErrWriter = &out, &out
	if err := a.Run([]string{"vm-controller", "manifests", "--root-disk", "ephemeral"}); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var granted []string
	for _, manifest := range strings.Split(out.String(), "\n---\n") {
		var obj struct {
			Kind  string `json:"kind"`
			Rules []struct {
				APIGroups []string `json:"apiGroups"`
				Resources []string `json:"resources"`
				Verbs     []string `json:"verbs"`
			} `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(manifest), &obj); err != nil {
			t.Fatal(err)
		}
		for _, r := range obj.Rules {
			if slices.Equal(r.APIGroups, []string{""}) && slices.Contains(r.Resources, "persistentvolumeclaims") {
				granted = append(granted, r.Verbs...)
			}
		}
	}
	if len(granted) < 2 {
		t.Fatalf("manifests --root-disk ephemeral grants %v on PersistentVolumeClaims; this test expects a list", granted)
	}
	want := "grants only " + strings.Join(granted[:len(granted)-1], ", ") + " and " + granted[len(granted)-1] + " on PersistentVolumeClaims"
	var usage string
	for _, cmd := range App("v1.0.0").Commands {
		if cmd.Name != "manifests" {
			continue
		}
		for _, f := range cmd.Flags {
			if f.Names()[0] == "root-disk" {
				usage = f.(*cli.StringFlag).Usage
			}
		}
	}
	if !strings.Contains(usage, want) {
		t.Errorf("manifests --root-disk says %q; the RBAC it prints under ephemeral %s", usage, want)
	}
}

package decision

import (
	"encoding/json"
	"testing"

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

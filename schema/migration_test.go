package schema

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// TestStatusPatchMigration: a status patch replaces the migration record the VM carries
// wholly, under every built-in version: the fields the new record leaves out are written as
// null, so that none of the old record's stays behind (a merge patch merges an object into
// the one it finds key by key), and the record read back is the one written.
func TestStatusPatchMigration(t *testing.T) {
	const refusal = "VM test-vm is not running: it is stopped (runStrategy Halted); start it first"
	succeeded := &MigrationStatus{RequestedAt: "2026-06-01T11:00:00Z", Phase: MigrationSucceeded, SourceNode: "node-a", TargetNode: "node-b",
		Message: "Server test-vm-server moved from node node-a to node node-b"}
	tests := map[string]struct {
		old, new *MigrationStatus // the record the VM carries, and the one the status written carries
		want     string           // status.migration in the patch
	}{
		"succeeded, then refused": {old: succeeded,
			new:  &MigrationStatus{RequestedAt: "2026-06-01T11:59:30Z", Phase: MigrationRefused, Message: refusal},
			want: `{"message":"` + refusal + `","phase":"Refused","requestedAt":"2026-06-01T11:59:30Z","sourceNode":null,"targetNode":null}`},
		"succeeded, then moving": {old: succeeded,
			new: &MigrationStatus{RequestedAt: "2026-06-01T11:59:30Z", Phase: MigrationMoving, SourceNode: "node-b",
				Message: "Moving server test-vm-server off node node-b"},
			want: `{"message":"Moving server test-vm-server off node node-b","phase":"Moving","requestedAt":"2026-06-01T11:59:30Z","sourceNode":"node-b","targetNode":null}`},
		"a record without a message": {old: succeeded,
			new:  &MigrationStatus{RequestedAt: "2026-06-01T11:59:30Z", Phase: MigrationMoving, SourceNode: "node-b"},
			want: `{"message":null,"phase":"Moving","requestedAt":"2026-06-01T11:59:30Z","sourceNode":"node-b","targetNode":null}`},
		"the same record": {old: succeeded, new: succeeded,
			want: `{"message":"Server test-vm-server moved from node node-a to node node-b","phase":"Succeeded","requestedAt":"2026-06-01T11:00:00Z","sourceNode":"node-a","targetNode":"node-b"}`},
		"a first record": {
			new:  &MigrationStatus{RequestedAt: "2026-06-01T11:59:30Z", Phase: MigrationRefused, Message: refusal},
			want: `{"message":"` + refusal + `","phase":"Refused","requestedAt":"2026-06-01T11:59:30Z","sourceNode":null,"targetNode":null}`},
		"no record any more": {old: succeeded, want: `null`},
	}
	for _, version := range BuiltinVersions() {
		f := builtin(t, version)
		for name, tc := range tests {
			t.Run(version+"/"+name, func(t *testing.T) {
				vm := withStatus(t, f, Status{Phase: PhaseActive, Reason: "ServerReady", Migration: tc.old}, "1")
				patch, err := StatusPatch(f, Status{Phase: PhaseInactive, Reason: "ServerStopped", Migration: tc.new}, "1")
				if err != nil {
					t.Fatal(err)
				}
				if got := gjson.GetBytes(patch, gjsonPath(f.Migration)).Raw; got != tc.want {
					t.Errorf("the patch writes %s as\n%s\nwant\n%s", f.Migration, got, tc.want)
				}
				merged, err := jsonpatch.MergePatch(vm.raw, patch)
				if err != nil {
					t.Fatal(err)
				}
				back, err := Parse(merged, f)
				if err != nil {
					t.Fatal(err)
				}
				if got := back.Status().Migration; !got.Same(tc.new) {
					t.Errorf("read back %+v, want %+v", got, tc.new)
				}
				// What the API server stores carries no nulls: the patch's remove fields, and
				// a record written where there was none is stored without them.
				if stored := gjson.GetBytes(merged, gjsonPath(f.Migration)); strings.Contains(stored.Raw, "null") {
					t.Errorf("stored %s", stored.Raw)
				}
			})
		}
	}
}

// TestMigrationPatchFields: the record a patch writes has a key for each field of
// MigrationStatus, so that a field the record gains is removed too when a later record
// leaves it out.
func TestMigrationPatchFields(t *testing.T) {
	keys := func(typ reflect.Type) []string {
		var out []string
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			out = append(out, name)
		}
		slices.Sort(out)
		return out
	}
	want := keys(reflect.TypeFor[MigrationStatus]())
	raw, err := json.Marshal(migrationJSON(&MigrationStatus{}))
	if err != nil {
		t.Fatal(err)
	}
	var written map[string]any
	if err := json.Unmarshal(raw, &written); err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(written))
	if !slices.Equal(got, want) {
		t.Errorf("the patch writes the record's fields %q, want %q (MigrationStatus's)", got, want)
	}
}

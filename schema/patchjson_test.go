package schema

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// marshalPatch is the tree of maps json.Marshal would write for values, as the patches were
// made before mergePatch: the reference that mergePatch's bytes are checked against.
func marshalPatch(t testing.TB, values []pathValue) []byte {
	t.Helper()
	root := map[string]any{}
	for _, e := range values {
		if e.path == "" {
			continue
		}
		v := e.v
		if conds, ok := v.([]Condition); ok && conds != nil {
			list := make([]map[string]any, 0, len(conds))
			for _, c := range conds {
				m := map[string]any{
					"type": c.Type, "status": string(c.Status), "reason": c.Reason, "message": c.Message,
					"lastTransitionTime": c.LastTransitionTime.UTC().Format(time.RFC3339),
				}
				if c.ObservedGeneration != 0 {
					m["observedGeneration"] = c.ObservedGeneration
				}
				list = append(list, m)
			}
			v = list
		}
		if err := setPath(root, e.path, v); err != nil {
			t.Fatal(err)
		}
	}
	b, err := json.Marshal(root)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// patchStatuses are statuses that take every branch of statusValues: with and without a
// server, usage, disk, conditions, migration and run strategies' fields, and strings that
// json.Marshal escapes.
func patchStatuses() map[string]Status {
	at := time.Date(2026, 11, 26, 21, 0, 0, 0, time.FixedZone("x", 3600))
	conds := []Condition{
		{Type: ConditionReady, Status: ConditionFalse, Reason: "Creating", Message: "the server is starting", LastTransitionTime: at},
		{Type: "Reconciling", Status: ConditionTrue, Reason: "Creating", Message: "", ObservedGeneration: 3, LastTransitionTime: at},
	}
	out := map[string]Status{
		"empty":    {},
		"creating": {Phase: PhaseCreating, Reason: "Creating", ObservedGeneration: 1, LastUpdateTime: at, Conditions: conds, Server: &ServerStatus{Name: "vm", ID: "uid-1", State: "Pending"}},
		"active": {Phase: PhaseActive, Reason: "Running", ObservedGeneration: 2, LastUpdateTime: at, Conditions: conds,
			Server:   &ServerStatus{Name: "vm", ID: "uid-1", State: "Running", Node: "node-1", IP: "10.0.0.1", Usage: &Usage{CPU: "250m", Memory: "1Gi"}},
			RootDisk: &RootDiskStatus{ClaimName: "vm-root", Phase: "Bound", Capacity: "10Gi"}, RestartedAt: "2026-11-26T20:00:00Z"},
		"failed": {Phase: PhaseFailed, Reason: "Invalid", Message: "spec.cpu: \"x\" <is> not & a quantity\n\tat é \u2028 \x01",
			ConsecutiveFailures: 3, Conditions: conds[:1],
			RunStrategyStatus: RunStrategyStatus{NextRetryTime: at, StartRequestedAt: "s<1>", StopRequestedAt: "t"}},
		"migrating": {Phase: PhaseActive, Reason: "Running", Server: &ServerStatus{Name: "vm", ID: "u", State: "Running"},
			Migration: &MigrationStatus{RequestedAt: "r", Phase: "Running", SourceNode: "a", TargetNode: "b", Message: "<m>"},
			RootDisk:  &RootDiskStatus{ClaimName: "c", Phase: "Pending"}},
		// A record without nodes: the patch writes them as null.
		"migration refused": {Phase: PhaseInactive, Reason: "ServerStopped",
			Migration: &MigrationStatus{RequestedAt: "r", Phase: MigrationRefused, Message: "not running"}},
		"invalid utf-8": {Phase: PhaseFailed, Reason: "Invalid", Message: "bad \xff\xfe bytes"},
	}
	// Each character json.Marshal escapes, alone in a string.
	for _, c := range []string{"<", ">", "&", `"`, `\`, "\n", "\x01", "\x7f", "é", "\u2028", "\xff"} {
		out["message "+strconv.Quote(c)] = Status{Phase: PhaseFailed, Reason: "Invalid", Message: "a" + c + "b"}
	}
	return out
}

// TestMergePatchAsMarshal: the status and usage patches are byte for byte what json.Marshal
// writes for the same tree of maps, under each layout, with and without a resourceVersion.
func TestMergePatchAsMarshal(t *testing.T) {
	for layout, f := range fuzzMaps(t) {
		for name, st := range patchStatuses() {
			for _, rv := range []string{"", "42"} {
				values := statusValues(f, st, rv)
				want := marshalPatch(t, values)
				got, err := StatusPatch(f, st, rv)
				if err != nil {
					t.Fatalf("%s, %s: %v", layout, name, err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s, %s, rv %q:\n got %s\nwant %s", layout, name, rv, got, want)
				}
				if !json.Valid(got) {
					t.Errorf("%s, %s: not JSON: %s", layout, name, got)
				}
			}
		}
		for _, u := range []*Usage{nil, {CPU: "1", Memory: "2Mi"}} {
			for _, conds := range [][]Condition{nil, {}, patchStatuses()["active"].Conditions} {
				got, err := UsagePatch(f, u, conds, "7")
				if err != nil {
					t.Fatal(err)
				}
				values := usageRemoved(f) // what it removes: TestUsagePatchRemovesUsage
				if u != nil {
					values = []pathValue{{f.UsageCPU, u.CPU}, {f.UsageMemory, u.Memory}}
				}
				if conds != nil {
					values = append(values, pathValue{f.Conditions, conds}, pathValue{"metadata.resourceVersion", "7"})
				}
				if want := marshalPatch(t, values); !bytes.Equal(got, want) {
					t.Errorf("%s, usage %v, conditions %v:\n got %s\nwant %s", layout, u, conds, got, want)
				}
			}
		}
	}
}

// TestMergePatchOrder: keys sorted segment by segment as json.Marshal sorts a map's, which is
// not the order of the whole paths ("a-b" sorts before "a.c" bytewise, after "a" in a map).
func TestMergePatchOrder(t *testing.T) {
	values := []pathValue{{"a.c", "1"}, {"a-b", "2"}, {"b", nil}, {"a.b.z", int64(3)}, {"a.b.y", 4}, {"", "skipped"}, {"A", "5"}}
	got, err := mergePatch(values)
	if err != nil {
		t.Fatal(err)
	}
	want := marshalPatch(t, []pathValue{{"a.c", "1"}, {"a-b", "2"}, {"b", nil}, {"a.b.z", int64(3)}, {"a.b.y", 4}, {"A", "5"}})
	if !bytes.Equal(got, want) {
		t.Errorf("got %s, want %s", got, want)
	}
	if string(want) != `{"A":"5","a":{"b":{"y":4,"z":3},"c":"1"},"a-b":"2","b":null}` {
		t.Errorf("the reference itself moved: %s", want)
	}
}

// TestMergePatchCollisions: a path given twice, or one inside another's value, is an error
// (a field map's mistake), whichever comes first.
func TestMergePatchCollisions(t *testing.T) {
	for _, c := range []struct {
		values []pathValue
		want   string
	}{
		{[]pathValue{{"status.phase", "a"}, {"status.phase", "b"}}, "given twice"},
		{[]pathValue{{"status.server", nil}, {"status.server.name", "n"}}, "crosses"},
		{[]pathValue{{"status.server.name", "n"}, {"status.server", nil}}, "crosses"},
	} {
		if _, err := mergePatch(c.values); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error that says %q", c.values, err, c.want)
		}
	}
}

// BenchmarkStatusPatch is the patch of an Active VM's status, as a burst writes one per VM.
func BenchmarkStatusPatch(b *testing.B) {
	f := builtin(b, "v1alpha1")
	st := patchStatuses()["active"]
	st.RootDisk = nil
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StatusPatch(f, st, "12345"); err != nil {
			b.Fatal(err)
		}
	}
}

// TestStatusPatchParentsPerLayout: a status without a server or a disk removes the group's own
// parent object under each layout, whichever layout was patched just before (parentsOf keeps
// the last layout's parents), so that no empty shell ({usage: {}}) is left behind.
func TestStatusPatchParentsPerLayout(t *testing.T) {
	maps := fuzzMaps(t)
	layouts := []string{"v1alpha1", "machine", "v1alpha1", "machine", "machine", "v1alpha1"}
	full := patchStatuses()["active"]
	for i, layout := range layouts {
		f := maps[layout]
		if got, want := *parentsOf(f), (groupParents{f: f, server: ownParent(f, f.serverPaths()), disk: ownParent(f, f.rootDiskPaths())}); got != want {
			t.Fatalf("step %d, %s: parentsOf gave %q and %q, want %q and %q", i, layout, got.server, got.disk, want.server, want.disk)
		}
		vm := withStatus(t, f, full, "1")
		patch, err := StatusPatch(f, Status{Phase: PhaseInactive, Reason: "Stopped"}, "")
		if err != nil {
			t.Fatal(err)
		}
		merged, err := jsonpatch.MergePatch(vm.raw, patch)
		if err != nil {
			t.Fatal(err)
		}
		p := parentsOf(f)
		for _, parent := range []string{p.server, p.disk} {
			if parent == "" {
				continue
			}
			if v := gjson.GetBytes(merged, parent); v.Exists() {
				t.Errorf("step %d, %s: %s is %s after a status without it, want it gone", i, layout, parent, v.Raw)
			}
		}
		if layout == "v1alpha1" && (p.server == "" || p.disk == "") {
			t.Errorf("v1alpha1: the server's and the disk's fields have parents of their own (status.server, status.rootDisk), got %q and %q", p.server, p.disk)
		}
	}
}

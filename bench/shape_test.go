package main

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestPaths: leaves by dotted path, conditions by type, other list items merged under [],
// values and empty leaves left out.
func TestPaths(t *testing.T) {
	status := map[string]any{
		"phase":  "Active",
		"server": map[string]any{"name": "vm-0-server", "node": "node-1", "ip": nil},
		"conditions": []any{
			map[string]any{"type": "Ready", "status": "True"},
			map[string]any{"type": "Paused", "reason": "x"},
		},
		"observedGeneration": int64(1),
	}
	got := paths("status", status)
	want := []string{"status.conditions[type=Paused].reason", "status.conditions[type=Paused].type",
		"status.conditions[type=Ready].status", "status.conditions[type=Ready].type",
		"status.observedGeneration", "status.phase", "status.server.name", "status.server.node"}
	if !slices.Equal(got, want) {
		t.Errorf("paths\n%q\nwant\n%q", got, want)
	}
	if got := paths("spec", map[string]any{"containers": []any{map[string]any{"name": "a"}, map[string]any{"image": "b"}}}); !slices.Equal(got, []string{"spec.containers[].image", "spec.containers[].name"}) {
		t.Errorf("paths of a list's items: %q", got)
	}
	if got := paths("", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a/b": "c"}}}); !slices.Equal(got, []string{"metadata.labels.a/b"}) {
		t.Errorf("paths without a prefix: %q", got)
	}
}

// TestShapeDiff: the same shape says nothing; a field on either side is named with the side
// and the phase that have it, and a phase only one side went through is named too.
func TestShapeDiff(t *testing.T) {
	peer := workShape{
		status: map[string][]string{"Creating": {"status.phase"}, "Active": {"status.phase", "status.server.name"}},
		pod:    []string{"spec.containers[].image"},
	}
	if d := peer.diff(peer); d != "" {
		t.Errorf("the same shape: %q, want nothing", d)
	}
	mine := workShape{
		status: map[string][]string{"Creating": {"status.conditions[type=Reconciling].type", "status.phase"}, "Active": {"status.phase", "status.server.name"}},
		pod:    []string{"spec.containers[].image", "spec.volumes[].name"},
	}
	want := "status Creating fields only it has: status.conditions[type=Reconciling].type; pod fields only it has: spec.volumes[].name"
	if d := mine.diff(peer); d != want {
		t.Errorf("diff\n%q\nwant\n%q", d, want)
	}
	want = "status Creating fields only the peer has: status.conditions[type=Reconciling].type; pod fields only the peer has: spec.volumes[].name"
	if d := peer.diff(mine); d != want {
		t.Errorf("diff the other way\n%q\nwant\n%q", d, want)
	}
	mine.status = map[string][]string{"Active": peer.status["Active"], "Failed": {"status.phase"}}
	mine.pod = peer.pod
	want = "status Failed where the peer has none; no status Creating where the peer has one"
	if d := mine.diff(peer); d != want {
		t.Errorf("diff of phases\n%q\nwant\n%q", d, want)
	}
}

// TestUnion: sorted, each path once.
func TestUnion(t *testing.T) {
	if got := union([]string{"a", "c"}, []string{"b", "c"}); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("union %q", got)
	}
}

// TestNoteShape: the watch keeps the first VM's status paths by phase, the union of every
// event of a phase, and nothing of the other VMs or of a status without a phase.
func TestNoteShape(t *testing.T) {
	w := &vmWatch{shapes: map[string][]string{}}
	vm := func(name string, status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": name}}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}
	w.noteShape(vm(vmName(0), nil))
	w.noteShape(vm(vmName(0), map[string]any{"phase": "Creating", "server": map[string]any{"name": "s"}}))
	w.noteShape(vm(vmName(0), map[string]any{"phase": "Creating", "server": map[string]any{"node": "n"}}))
	w.noteShape(vm(vmName(1), map[string]any{"phase": "Active", "other": "x"}))
	w.noteShape(vm(vmName(0), map[string]any{"phase": "Active"}))
	got := w.statusShapes()
	want := map[string][]string{
		"Creating": {"status.phase", "status.server.name", "status.server.node"},
		"Active":   {"status.phase"},
	}
	if len(got) != len(want) || !slices.Equal(got["Creating"], want["Creating"]) || !slices.Equal(got["Active"], want["Active"]) {
		t.Errorf("shapes %q, want %q", got, want)
	}
}

package main

import (
	"slices"
	"testing"
)

// TestPaths: leaves by dotted path, list items merged under [], values and empty leaves left
// out.
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
	want := []string{"status.conditions[].reason", "status.conditions[].status", "status.conditions[].type",
		"status.observedGeneration", "status.phase", "status.server.name", "status.server.node"}
	if !slices.Equal(got, want) {
		t.Errorf("paths\n%q\nwant\n%q", got, want)
	}
	if got := paths("", map[string]any{"metadata": map[string]any{"labels": map[string]any{"a/b": "c"}}}); !slices.Equal(got, []string{"metadata.labels.a/b"}) {
		t.Errorf("paths without a prefix: %q", got)
	}
}

// TestShapeDiff: the same shape says nothing; a field on either side is named with the side
// that has it.
func TestShapeDiff(t *testing.T) {
	peer := workShape{vm: []string{"status.phase", "status.server.name"}, pod: []string{"spec.containers[].image"}}
	if d := peer.diff(peer); d != "" {
		t.Errorf("the same shape: %q, want nothing", d)
	}
	mine := workShape{vm: []string{"status.phase", "status.server.name", "status.server.node"}, pod: []string{"spec.containers[].image", "spec.volumes[].name"}}
	want := "VM status fields only it has: status.server.node; pod fields only it has: spec.volumes[].name"
	if d := mine.diff(peer); d != want {
		t.Errorf("diff\n%q\nwant\n%q", d, want)
	}
	want = "VM status fields only the peer has: status.server.node; pod fields only the peer has: spec.volumes[].name"
	if d := peer.diff(mine); d != want {
		t.Errorf("diff the other way\n%q\nwant\n%q", d, want)
	}
}

package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// The side-by-side is only fair if both controllers do the same work: the same pod and the
// same statuses for each VM. The peer is written to match vm-controller, so a field one of them
// gains is easy to miss (the peer's statuses once lacked the server's node and address, and
// its Creating status the Reconciling condition, which cost the API server more for
// vm-controller's VMs than for the peer's, unseen). compare reads the first VM's statuses off
// the bench's watch and its pod after each contender's first burst, and prints where they
// differ from the peer's. It compares which fields each wrote, phase by phase on the way to
// Active: not their values or order, nor how many writes a phase took (the burst's writes per
// VM count those), nor the way out, where the two differ by design.

// workShape is what a controller made for one VM, as the sets of its fields' paths (values
// left out: names, UIDs and times differ from run to run): the VM's status in each phase it
// went through, and the pod's spec, labels, annotations and owners.
type workShape struct {
	status map[string][]string // by phase
	pod    []string
}

// shapeOf reads the shape of the work done for the VM named name in e's namespace: its
// statuses as w saw them, and its pod.
func shapeOf(e *env, w *vmWatch, name string) (workShape, error) {
	pod, err := e.kube.CoreV1().Pods(e.ns).Get(context.Background(), name+"-server", metav1.GetOptions{})
	if err != nil {
		return workShape{}, fmt.Errorf("read the pod of VM %s: %w", name, err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		return workShape{}, fmt.Errorf("read the pod of VM %s: %w", name, err)
	}
	meta, _ := u["metadata"].(map[string]any)
	made := map[string]any{"spec": u["spec"], "metadata": map[string]any{
		"labels": meta["labels"], "annotations": meta["annotations"], "ownerReferences": meta["ownerReferences"]}}
	return workShape{status: w.statusShapes(), pod: paths("", made)}, nil
}

// paths lists the paths of v's leaves under prefix, sorted: a map's keys joined by dots, a
// list's items as [] (the union of their paths), but items with a type (conditions) as
// [type=T], so that a condition one side writes and the other does not tells.
func paths(prefix string, v any) []string {
	seen := map[string]bool{}
	var walk func(p string, v any)
	walk = func(p string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				walk(strings.TrimPrefix(p+"."+k, "."), e)
			}
		case []any:
			for _, e := range v {
				if m, ok := e.(map[string]any); ok {
					if t, ok := m["type"].(string); ok { // a condition: its type is part of the shape
						walk(p+"[type="+t+"]", e)
						continue
					}
				}
				walk(p+"[]", e)
			}
		case nil:
		default:
			seen[p] = true
		}
	}
	walk(prefix, v)
	return slices.Sorted(maps.Keys(seen))
}

// diff says how a's shape differs from the peer's: each side's paths the other lacks, by
// phase for the status, or "" if they are the same.
func (a workShape) diff(peer workShape) string {
	type part struct {
		what     string
		mine, cr []string
	}
	var parts []part
	phases := slices.Sorted(maps.Keys(a.status))
	for _, p := range slices.Sorted(maps.Keys(peer.status)) {
		if _, ok := a.status[p]; !ok {
			phases = append(phases, p)
		}
	}
	for _, p := range phases {
		parts = append(parts, part{"status " + p, a.status[p], peer.status[p]})
	}
	parts = append(parts, part{"pod", a.pod, peer.pod})
	var out []string
	for _, s := range parts {
		switch {
		case s.mine == nil:
			out = append(out, "no "+s.what+" where the peer has one")
		case s.cr == nil:
			out = append(out, s.what+" where the peer has none")
		default:
			if only := minus(s.mine, s.cr); len(only) > 0 {
				out = append(out, fmt.Sprintf("%s fields only it has: %s", s.what, strings.Join(only, ", ")))
			}
			if only := minus(s.cr, s.mine); len(only) > 0 {
				out = append(out, fmt.Sprintf("%s fields only the peer has: %s", s.what, strings.Join(only, ", ")))
			}
		}
	}
	return strings.Join(out, "; ")
}

// union is the sorted union of a and b, each sorted.
func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// minus is the paths of a that b lacks.
func minus(a, b []string) []string {
	var out []string
	for _, p := range a {
		if !slices.Contains(b, p) {
			out = append(out, p)
		}
	}
	return out
}
